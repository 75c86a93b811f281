"""An op's declared `float_ufunc`, which the dispatch fast paths call in place of its kernel on float32/float64
operands, computes exactly what the kernel does there: same values (bit for bit, NaN included), dtype and shape."""

from __future__ import annotations

import numpy as np
import pytest

import ember  # noqa: F401 - registers every op
from ember.op import OPS

WITH_UFUNC = sorted(name for name, op in OPS.items() if op.float_ufunc is not None)


def _values(dtype, shape, rng):
    x = rng.standard_normal(shape).astype(dtype) * 3
    x.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    return x


def _same(fast, kernel, *args):
    """fast(*args) is kernel(np, *args); where the kernel refuses (bitwise ops on floats) the ufunc raises too, and
    the fast path then hands the call to apply(), which reports the op's own error."""
    try:
        b = kernel(np, *args)
    except Exception:  # noqa: BLE001 - whatever the kernel raises
        with pytest.raises(Exception):  # noqa: B017
            fast(*args)
        return
    a = fast(*args)
    assert type(a) is type(b) is np.ndarray
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_the_elementwise_ops_declare_their_ufunc():
    assert {"add", "sub", "mul", "div", "exp", "tanh", "sqrt", "maximum", "eq", "lt"} <= set(WITH_UFUNC)
    assert OPS["relu"].float_ufunc is None  # a kernel of its own: the fast path calls it


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", WITH_UFUNC)
def test_float_ufunc_is_the_kernel(name, dtype):
    op = OPS[name]
    rng = np.random.default_rng(0)
    a, b = _values(dtype, (3, 5), rng), _values(dtype, (3, 5), rng)
    with np.errstate(all="ignore"):
        if isinstance(op, type(OPS["exp"])):
            _same(op.float_ufunc, op.kernel, a)
            return
        _same(op.float_ufunc, op.kernel, a, b)
        _same(op.float_ufunc, op.kernel, a, b[:1])  # broadcasting
        for scalar in (2, 0.5, -3):
            _same(op.float_ufunc, op.kernel, a, scalar)
            _same(op.float_ufunc, op.kernel, scalar, a)
