"""The compiled max pooling (Numba) gives the NumPy path's values and argmax exactly (NaNs included) and its gradient."""

import numpy as np
import pytest

import ember as em
from ember.graph import codegen
from ember.kernels import pooling
from ember.kernels.numba_loader import kernel_for

pytest.importorskip("numba")


def _both(fn):
    try:
        codegen.set_backend("numpy")
        want = fn()
        codegen.set_backend("numba")
        got = fn()
    finally:
        codegen.set_backend(None)
    return want, got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, 2, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), ((3, 2), (1, 2), (1, 0), (2, 1), False),
    (2, 3, 1, 2, True), ((7, 5), 1, (3, 2), 1, False),
    (8, 3, 4, 1, True),  # 64 taps: the general loop, not the written-out taps
])
def test_compiled_max_pool_equals_numpy(dtype, kernel, stride, padding, dilation, ceil_mode, thresholds):
    thresholds(pooling.MAX_POOL2D, general_min_bytes=0)  # the compiled forward, at a small size
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 31, 23)).astype(dtype)  # large enough to run compiled
    x[0, 0, :4, :4] = np.nan  # a NaN wins its windows
    x[1, 2] = -np.inf  # a plane of -inf: the first in-bounds tap is the argmax
    x[2, 3, 1::2] = x[2, 3, ::2][:15]  # ties
    g = None

    def run():
        t = em.tensor(x, requires_grad=True)
        y, idx = em.nn.functional.max_pool2d(t, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        nonlocal g
        g = rng.standard_normal(tuple(y.shape)).astype(dtype) if g is None else g
        y.backward(em.tensor(g))
        return y.detach().numpy(), idx.numpy(), t.grad.numpy()

    assert kernel_for(pooling._SOURCE, "max_pool2d", np, x.dtype, x.size) is not None
    want, got = _both(run)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    # overlapping windows add into one input element in another order
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5 if dtype == np.float32 else 1e-14, atol=1e-6)


@pytest.mark.parametrize("forward_min_bytes", [0, 1 << 40])
@pytest.mark.parametrize("shape,kernel,stride,padding", [
    ((16, 6, 28, 28), 3, 2, 1),
    ((16, 6, 27, 29), 2, 2, 0),  # the 2x2 loops; an odd row and column left out of every window
])
def test_compiled_max_pool_matches_torch(forward_min_bytes, shape, kernel, stride, padding, thresholds):
    """Both loops, each serial and with its planes split over the batch threads (the size rules set to 0)."""
    thresholds(pooling.MAX_POOL2D, general_min_bytes=forward_min_bytes, split_2x2_min_bytes=forward_min_bytes,
               native_split_2x2_min_bytes=forward_min_bytes)
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    ty, tidx = torch.nn.functional.max_pool2d(tx, kernel, stride, padding, return_indices=True)
    g = np.random.default_rng(4).standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g))
    ex = em.tensor(x, requires_grad=True)
    ey, eidx = em.nn.functional.max_pool2d(ex, kernel, stride, padding, return_indices=True)
    ey.backward(em.tensor(g))
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(eidx.numpy(), tidx.numpy())
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
