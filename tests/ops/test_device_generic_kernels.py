"""The array-module-generic kernels that stand in for CuPy's missing or inexact ones, run here with NumPy as the
module and compared with NumPy's own: scatter maximum/minimum/product by sorting (CuPy's atomic scatter_max/min
round float64 to float32 and it has no scatter product), and argmax/argmin where the first NaN wins (CuPy's
parallel reductions return whichever NaN they meet)."""

import numpy as np
import pytest

from ember.ops.indexing import _along_dim_index
from ember.ops.reduction import _first_nan_or
from ember.ops.scatter_reduce import reduce_at_sorted


@pytest.mark.parametrize("name", ["maximum", "minimum", "multiply"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_scatter_by_sorting_equals_numpy_ufunc_at(name, dtype):
    rng = np.random.default_rng(0)
    for trial in range(60):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=rng.integers(1, 4)))
        dim = int(rng.integers(0, len(shape)))
        index_shape = list(shape)
        index_shape[dim] = int(rng.integers(1, 9))
        index = rng.integers(-shape[dim], shape[dim], size=index_shape)  # negative indices count from the end
        values = (rng.standard_normal(index_shape) * 2).astype(dtype)
        if dtype != np.int64 and trial % 3 == 0:
            values.reshape(-1)[rng.integers(0, values.size)] = np.nan
        out = (rng.standard_normal(shape) * 2).astype(dtype)
        expected = out.copy()
        idx = _along_dim_index(np, index, dim)
        with np.errstate(invalid="ignore"):
            getattr(np, name).at(expected, idx, values)
            reduce_at_sorted(np, name, out, idx, values)
        if name == "multiply" and dtype != np.int64:  # the scan multiplies in another order
            np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, equal_nan=True)
        else:
            np.testing.assert_array_equal(out, expected)


def test_a_long_group_product_and_an_empty_scatter():
    values = np.linspace(0.5, 1.5, 1000)
    out = np.ones(3)
    index = np.arange(1000) % 3
    expected = out.copy()
    np.multiply.at(expected, index, values)
    reduce_at_sorted(np, "multiply", out, (index,), values)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    untouched = np.ones(3)
    reduce_at_sorted(np, "maximum", untouched, (np.zeros(0, np.int64),), np.zeros(0))
    assert (untouched == 1).all()


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_take_the_first_nan(name):
    x = np.array([[1.0, np.nan, 3.0, np.nan], [4.0, 2.0, 5.0, 0.0], [np.nan, 1.0, 1.0, np.nan]])
    for axis, keepdims in ((1, False), (0, True), (None, False)):
        np.testing.assert_array_equal(_first_nan_or(np, name, x, axis=axis, keepdims=keepdims),
                                      getattr(np, name)(x, axis=axis, keepdims=keepdims))
