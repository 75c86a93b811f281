"""ember.array_api: the namespace is there and a few functions behave as the standard says (no external suite)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember as em
import ember.array_api as xp

# A sample of the 2023.12 names from every area (the official suite checks them all).
NAMES = [
    "__array_api_version__", "__array_namespace_info__", "e", "inf", "nan", "pi", "newaxis",
    "bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64",
    "arange", "asarray", "empty", "empty_like", "eye", "full", "full_like", "linspace", "meshgrid", "ones",
    "ones_like", "tril", "triu", "zeros", "zeros_like", "astype", "can_cast", "finfo", "iinfo", "isdtype",
    "result_type", "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift", "clip", "copysign", "hypot", "logaddexp",
    "nextafter", "signbit", "positive", "real", "imag", "conj", "matmul", "matrix_transpose", "tensordot", "vecdot",
    "broadcast_arrays", "concat", "expand_dims", "flip", "moveaxis", "permute_dims", "repeat", "reshape", "roll",
    "squeeze", "stack", "tile", "unstack", "argmax", "argmin", "nonzero", "searchsorted", "where", "unique_all",
    "unique_counts", "unique_inverse", "unique_values", "argsort", "sort", "cumulative_sum", "max", "mean", "min",
    "prod", "std", "sum", "var", "all", "any", "take", "linalg",
]
LINALG = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
          "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
          "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]


def test_names_and_namespace():
    x = xp.asarray([1.0, 2.0])
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    assert xp.__array_api_version__ == "2024.12"
    missing = [n for n in NAMES if not hasattr(xp, n)] + [n for n in LINALG if not hasattr(xp.linalg, n)]
    assert not missing
    assert set(xp.__all__) >= set(NAMES) - {"__array_api_version__", "__array_namespace_info__"}
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")


def test_promotion_follows_the_standard():
    a = xp.asarray(3, dtype=xp.int16)  # 0-d
    b = xp.asarray([1, 2], dtype=xp.int8)
    assert xp.add(a, b).dtype == xp.int16  # the standard: 0-d arrays take part like any other
    assert (a + b).dtype == xp.int8  # Tensor operators keep PyTorch's rule (see docs/interop.md)
    assert xp.multiply(xp.asarray([1, 2], dtype=xp.uint8), xp.asarray([1], dtype=xp.int8)).dtype == xp.int16
    assert xp.result_type(xp.float32, xp.float64, xp.asarray([1.0])) == xp.float64
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.int16, xp.int8)
    assert not xp.can_cast(xp.float32, xp.int64) and xp.can_cast(xp.bool, xp.int8)
    assert xp.where(xp.asarray([True, False]), xp.asarray(1.0, dtype=xp.float64), xp.asarray([2.0])).dtype == xp.float64


def test_dtype_inspection():
    assert xp.isdtype(xp.int8, "signed integer") and xp.isdtype(xp.uint8, ("bool", "unsigned integer"))
    assert not xp.isdtype(xp.float32, "integral") and xp.isdtype(xp.float64, xp.float64)
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps and xp.finfo(xp.float64).dtype == xp.float64
    assert xp.iinfo(xp.int8).min == -128 and xp.iinfo(xp.uint8).max == 255
    with pytest.raises(TypeError, match="finfo"):
        xp.finfo(xp.int32)
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["indexing"] == xp.int64
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert em.device("cpu") in info.devices()


def test_reductions():
    x = xp.asarray([[1, 2, 3], [4, 5, 6]], dtype=xp.int8)
    assert xp.sum(x).dtype == xp.int64 and int(xp.sum(x)) == 21
    assert xp.sum(x, dtype=xp.int8).dtype == xp.int8
    assert xp.sum(x, axis=()).shape == (2, 3)  # an empty tuple reduces nothing (PyTorch's dim=() reduces all)
    assert xp.prod(x, axis=(0, 1), keepdims=True).shape == (1, 1)
    f = xp.asarray([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(xp.var(f, correction=1.5).numpy(), np.var(f.numpy(), ddof=1.5), rtol=1e-6)
    np.testing.assert_allclose(xp.std(f, axis=0).numpy(), np.std(f.numpy(), axis=0), rtol=1e-6)
    assert xp.cumulative_sum(xp.asarray([1, 2, 3]), include_initial=True).tolist() == [0, 1, 3, 6]
    assert xp.all(xp.asarray([[True, False]]), axis=1, keepdims=True).tolist() == [[False]]


def test_sorting_and_sets():
    x = xp.asarray([3.0, 1.0, 3.0, 1.0, 2.0])
    assert xp.argsort(x, descending=True).tolist() == [0, 2, 4, 1, 3]  # stable: ties keep their order
    assert xp.sort(x, descending=True).tolist() == [3.0, 3.0, 2.0, 1.0, 1.0]
    u = xp.unique_all(xp.asarray([2.0, math.nan, 2.0, math.nan, 1.0]))
    assert u.values.shape == (4,)  # each NaN is its own value
    assert u.counts.tolist()[:2] == [1, 2] and u.indices.tolist()[:2] == [4, 0]
    inv = xp.unique_inverse(xp.asarray([[1, 2], [2, 1]])).inverse_indices
    assert inv.shape == (2, 2) and inv.tolist() == [[0, 1], [1, 0]]
    assert xp.searchsorted(xp.asarray([1, 2, 2, 3]), xp.asarray([2]), side="right").tolist() == [3]
    assert [t.tolist() for t in xp.nonzero(xp.asarray([[0, 1], [1, 0]]))] == [[0, 1], [1, 0]]
    assert xp.take(xp.asarray([10, 20, 30]), xp.asarray([2, 0])).tolist() == [30, 10]


def test_creation_and_copies():
    a = np.arange(4.0)
    shared = xp.asarray(a, copy=False)
    a[0] = 9.0
    assert float(shared[0]) == 9.0
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray(shared, dtype=xp.float32, copy=False)
    assert xp.asarray(shared, copy=True) is not shared and xp.asarray(shared) is shared
    assert xp.asarray([1, 2]).dtype == xp.int64 and xp.asarray([True, 1.5]).dtype == xp.float32
    x = xp.ones((2,), dtype=xp.float32)
    assert xp.astype(x, xp.float32, copy=False) is x and xp.astype(x, xp.float32) is not x
    assert xp.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert xp.linspace(0, 1, 4, endpoint=False).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert xp.full((2,), True).dtype == xp.bool and xp.eye(2, 3, k=1).tolist() == [[0, 1, 0], [0, 0, 1]]
    gx, gy = xp.meshgrid(xp.arange(3), xp.arange(2))
    assert gx.shape == (2, 3) and gy.shape == (2, 3)
    shared = np.arange(3.0)
    via_dlpack = xp.from_dlpack(shared)
    shared[1] = 7.0
    assert via_dlpack.tolist() == [0.0, 7.0, 2.0] and xp.from_dlpack(shared, copy=True) is not via_dlpack
    y = xp.zeros(3).to_device("cpu")
    assert y.device == em.device("cpu")


def test_manipulation():
    x = xp.reshape(xp.arange(6), (2, 3))
    assert xp.expand_dims(x, axis=-1).shape == (2, 3, 1)
    assert xp.squeeze(xp.expand_dims(x, axis=0), axis=0).shape == (2, 3)
    with pytest.raises(ValueError, match="squeeze"):
        xp.squeeze(x, axis=0)
    assert xp.repeat(xp.asarray([1, 2]), xp.asarray([2, 1])).tolist() == [1, 1, 2]
    assert xp.flip(x).tolist() == [[5, 4, 3], [2, 1, 0]]
    assert xp.concat([x, x], axis=None).shape == (12,)
    assert xp.roll(x, 1).tolist() == [[5, 0, 1], [2, 3, 4]]
    assert [t.tolist() for t in xp.unstack(x, axis=1)] == [[0, 3], [1, 4], [2, 5]]
    assert xp.matrix_transpose(x).shape == (3, 2) and x.mT.shape == (3, 2)


def test_elementwise_and_operators():
    x = xp.asarray([-1.5, -0.0, 0.0, 2.0])
    assert xp.signbit(x).tolist() == [True, True, False, False]
    assert xp.clip(xp.asarray([1, 5, 9], dtype=xp.int8), 2, 6).tolist() == [2, 5, 6]
    np.testing.assert_allclose(xp.logaddexp(xp.asarray([1.0]), xp.asarray([2.0])).numpy(), np.logaddexp(1, 2),
                               rtol=1e-6)
    i = xp.asarray([1, 2, 3], dtype=xp.int16)
    assert (i << 2).tolist() == [4, 8, 12] and (i >> 1).tolist() == [0, 1, 1]
    i <<= 1
    i |= 1
    assert i.tolist() == [3, 5, 7] and i.dtype == xp.int16
    assert complex(xp.asarray(2.0)) == 2 + 0j


def test_linalg_extension():
    a = xp.asarray([[2.0, 1.0], [1.0, 3.0]], dtype=xp.float64)
    np.testing.assert_allclose(xp.linalg.matrix_power(a, 3).numpy(), np.linalg.matrix_power(a.numpy(), 3))
    np.testing.assert_allclose(xp.linalg.matrix_power(a, -1).numpy(), np.linalg.inv(a.numpy()))
    assert xp.linalg.cross(xp.asarray([1.0, 0, 0]), xp.asarray([0.0, 1, 0])).tolist() == [0.0, 0.0, 1.0]
    assert float(xp.linalg.trace(a)) == 5.0 and int(xp.linalg.matrix_rank(a)) == 2
    np.testing.assert_allclose(float(xp.linalg.vector_norm(a, ord=1)), 7.0)
    assert xp.vecdot(xp.asarray([1, 2], dtype=xp.uint8), xp.asarray([3, 4], dtype=xp.uint8)).dtype == xp.uint8


def test_errors_name_the_function():
    with pytest.raises(TypeError, match="array_api.sum"):
        xp.sum([1, 2])
    with pytest.raises(TypeError, match="complex"):
        xp.asarray(1j)
    with pytest.raises(ValueError, match="cumulative_sum"):
        xp.cumulative_sum(xp.ones((2, 2)))


def test_against_array_api_strict():
    """The same calls through array-api-strict (NumPy underneath) give the same values and dtypes."""
    st = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(0)
    data = rng.normal(size=(3, 4)).astype(np.float32)
    ints = rng.integers(-5, 5, size=(3, 4)).astype(np.int16)
    cases = [
        lambda m, f, i: m.sum(f, axis=1),
        lambda m, f, i: m.mean(f, axis=(0, 1), keepdims=True),
        lambda m, f, i: m.var(f, axis=0, correction=1),
        lambda m, f, i: m.max(i, axis=0),
        lambda m, f, i: m.argmax(f, axis=1),
        lambda m, f, i: m.cumulative_sum(i, axis=1),
        lambda m, f, i: m.hypot(f, m.flip(f)),
        lambda m, f, i: m.floor_divide(i, m.asarray(3, dtype=m.int8)),
        lambda m, f, i: m.matmul(f, m.matrix_transpose(f)),
        lambda m, f, i: m.tensordot(f, f, axes=([0, 1], [0, 1])),
        lambda m, f, i: m.concat([i, m.astype(i, m.int32)], axis=0),
        lambda m, f, i: m.sort(i, axis=0, descending=True),
        lambda m, f, i: m.unique_values(i),
        lambda m, f, i: m.linalg.vector_norm(f, axis=1, ord=3),
        lambda m, f, i: m.linalg.matrix_norm(f[:3, :3], ord="nuc"),
        lambda m, f, i: m.roll(i, -2, axis=1),
        lambda m, f, i: m.expand_dims(i, axis=1),
        lambda m, f, i: m.where(f > 0, f, m.asarray(0.0, dtype=m.float32)),
    ]
    for k, case in enumerate(cases):
        want = case(st, st.asarray(data), st.asarray(ints))
        got = case(xp, xp.asarray(data), xp.asarray(ints))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], k
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-5, atol=1e-6, err_msg=str(k))


def test_autograd_and_jit_through_the_namespace():
    def softmax(x):
        xp_ = x.__array_namespace__()
        e = xp_.exp(x - xp_.max(x, axis=-1, keepdims=True))
        return e / xp_.sum(e, axis=-1, keepdims=True)

    data = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    x, ref = em.tensor(data, requires_grad=True), em.tensor(data, requires_grad=True)
    softmax(x)[:, 0].sum().backward()
    em.softmax(ref, -1)[:, 0].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(em.jit(softmax)(em.tensor(data)).numpy(), em.softmax(em.tensor(data), -1).numpy(),
                               rtol=1e-6)
