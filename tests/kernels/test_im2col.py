"""The compiled im2col (Numba) gives exactly the NumPy path's patches, for every layout and convolution setting."""

import numpy as np
import pytest

from ember.graph import codegen
from ember.kernels import conv
from ember.kernels.conv import patches as im2col_kernels

pytest.importorskip("numba")


def _assert_compiled_patches_equal_numpy(x, kh, kw, stride, pad, dil, groups, per_sample):
    """The compiled im2col's patches (and output size) are the NumPy path's, exactly."""
    build = conv.im2col_per_sample if per_sample else conv.im2col
    try:
        codegen.set_backend("numpy")
        want, oh, ow = build(np, x, kh, kw, stride, pad, dil, groups)
        codegen.set_backend("numba")
        got, oh2, ow2 = build(np, x, kh, kw, stride, pad, dil, groups)
    finally:
        codegen.set_backend(None)
    assert (oh, ow) == (oh2, ow2) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride,pad,dil,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1), ((2, 1), (1, 1, 1, 1), (1, 1), 1), ((1, 2), (2, 0, 1, 3), (2, 1), 1),
    ((3, 3), (1, 2, 0, 1), (1, 2), 2), ((1, 1), (2, 2, 2, 2), (2, 2), 4),
])
@pytest.mark.parametrize("per_sample", [True, False])
def test_compiled_im2col_equals_numpy(dtype, stride, pad, dil, groups, per_sample):
    x = np.random.default_rng(0).standard_normal((3, 8, 17, 13)).astype(dtype)
    _assert_compiled_patches_equal_numpy(x, 3, 4, stride, pad, dil, groups, per_sample)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride,pad,dil", [
    ((7, 7), (2, 2), (3, 3, 3, 3), (1, 1)), ((5, 5), (2, 2), (0, 0, 0, 0), (1, 1)), ((7, 5), (3, 2), (1, 4, 2, 0), (1, 1)),
    ((5, 7), (2, 3), (2, 2, 2, 2), (2, 1)), ((3, 4), (2, 1), (0, 3, 1, 1), (2, 2)), ((6, 6), (3, 3), (5, 5, 5, 5), (1, 1)),
])
@pytest.mark.parametrize("per_sample", [True, False])
def test_strided_patches_through_phase_planes_equal_numpy(dtype, kernel, stride, pad, dil, per_sample):
    """Strided layers whose input values recur in many patches (a 7x7 stride-2 stem) take the phase-plane
    im2col; it gives the NumPy path's patches exactly, with padding wider than a phase and dilation."""
    kh, kw = kernel
    assert kh * kw >= im2col_kernels._PHASED_MIN_REUSE * stride[0] * stride[1]
    x = np.random.default_rng(3).standard_normal((2, 3, 23, 19)).astype(dtype)
    _assert_compiled_patches_equal_numpy(x, kh, kw, stride, pad, dil, 1, per_sample)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride,pad,dil", [
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1)), ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1)), ((1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),
    ((3, 2), (3, 2), (4, 0, 5, 2), (1, 1)), ((2, 3), (2, 3), (1, 2, 0, 6), (3, 2)), ((3, 3), (1, 4), (2, 2, 9, 9), (1, 1)),
])
@pytest.mark.parametrize("per_sample", [True, False])
def test_strided_patches_with_bounds_per_tap_equal_numpy(dtype, kernel, stride, pad, dil, per_sample):
    """Strided layers with few taps per stride (3x3 stride 2) gather each patch row between bounds found once per
    tap; padding wider than the kernel (rows and columns wholly outside the input) included."""
    kh, kw = kernel
    assert kh * kw < im2col_kernels._PHASED_MIN_REUSE * stride[0] * stride[1]
    x = np.random.default_rng(5).standard_normal((3, 8, 27, 26)).astype(dtype)  # compiled from 16384 values
    _assert_compiled_patches_equal_numpy(x, kh, kw, stride, pad, dil, 1, per_sample)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kernel,groups", [((3, 8, 17, 13), (3, 4), 1), ((4, 6, 14, 14), (5, 5), 2),
                                                 ((4, 16, 19, 17), (1, 1), 1), ((1, 3, 40, 6), (6, 6), 3)])
@pytest.mark.parametrize("per_sample", [True, False])
def test_valid_patches_equal_numpy(dtype, shape, kernel, groups, per_sample):
    """Stride-1 layers without padding or dilation take a kernel with no bounds tests: the same patches (every
    case has at least 16384 patch values, so the compiled kernel runs)."""
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    _assert_compiled_patches_equal_numpy(x, *kernel, (1, 1), (0, 0, 0, 0), (1, 1), groups, per_sample)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kernel,pad,groups", [
    ((3, 8, 17, 13), (3, 4), (1, 1, 1, 1), 1), ((4, 16, 10, 10), (5, 5), (4, 4, 4, 4), 2),
    ((2, 3, 28, 28), (5, 5), (2, 0, 3, 1), 1), ((1, 64, 7, 7), (3, 3), (1, 1, 1, 1), 1),
    ((4, 8, 19, 21), (2, 3), (6, 7, 8, 9), 1),  # padding wider than the kernel: whole rows and columns of zeros
])
@pytest.mark.parametrize("per_sample", [True, False])
def test_padded_unit_stride_patches_equal_numpy(dtype, shape, kernel, pad, groups, per_sample):
    """Padded stride-1 undilated layers read their patches from a zeroed scratch plane per (sample, channel):
    the same patches, for asymmetric and wide padding (every case compiled: at least 16384 patch values)."""
    x = np.random.default_rng(8).standard_normal(shape).astype(dtype)
    _assert_compiled_patches_equal_numpy(x, *kernel, (1, 1), pad, (1, 1), groups, per_sample)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride,pad,dil", [
    ((1, 1), (0, 0, 0, 0), (1, 1)), ((2, 1), (1, 1, 1, 1), (1, 1)), ((1, 2), (2, 0, 1, 3), (2, 1)),
    ((3, 3), (1, 2, 0, 1), (1, 2)), ((2, 2), (2, 2, 2, 2), (2, 2)),
    ((1, 1), (2, 0, 1, 3), (1, 1)), ((1, 1), (4, 5, 6, 7), (1, 1)),  # stride 1: summed in a scratch plane
])
def test_compiled_col2im_equals_numpy(dtype, stride, pad, dil):
    n, c, h, w, kh, kw = 3, 8, 17, 13, 3, 4
    oh, ow = conv._out_hw(np.empty((n, c, h, w)), kh, kw, stride, pad, dil)
    cols = np.random.default_rng(1).standard_normal((c * kh * kw, n * oh * ow)).astype(dtype)
    try:
        codegen.set_backend("numpy")
        want = conv.col2im(np, cols, n, c, h, w, kh, kw, oh, ow, stride, pad, dil)
        codegen.set_backend("numba")
        got = conv.col2im(np, cols, n, c, h, w, kh, kw, oh, ow, stride, pad, dil)
    finally:
        codegen.set_backend(None)
    assert got.shape == want.shape == (n, c, h, w) and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-12 if dtype == np.float64 else 1e-5)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("x_shape,w_shape,stride,padding", [
    ((8, 6, 14, 14), (16, 6, 5, 5), 1, 0),   # LeNet's second layer: its input gradient goes through col2im
    ((4, 16, 32, 32), (32, 16, 3, 3), 2, 1),  # a strided ResNet layer
    ((4, 16, 16, 16), (16, 16, 3, 3), 1, 1),  # same width and size: the direct convolution
    ((8, 64, 32, 32), (64, 64, 3, 3), 1, 1),  # a sample's patches over 2 MB: one block each, the workspace reused
    ((2, 3, 40, 40), (8, 3, 7, 7), 2, 3),  # a ResNet stem: its patches come from the input's phase planes
])
def test_conv_gradients_match_torch_on_both_paths(backend, x_shape, w_shape, stride, padding):
    torch = pytest.importorskip("torch")
    import ember as em

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g))
    try:
        codegen.set_backend(backend)
        ex, ew = em.tensor(x, requires_grad=True), em.tensor(w, requires_grad=True)
        em.nn.functional.conv2d(ex, ew, stride=stride, padding=padding).backward(em.tensor(g))
    finally:
        codegen.set_backend(None)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    # the weight's gradient sums N*OH*OW products: float32 rounding grows with its magnitude
    scale = float(np.abs(tw.grad.numpy()).max())
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=2e-4 + 2e-6 * scale)


def test_workspace_is_reused_per_thread_and_dtype():
    from ember.kernels import parallel

    a = parallel.workspace(1000, np.float32)
    b = parallel.workspace(500, np.float32)
    assert np.shares_memory(a, b) and b.size == 500  # the same pages, not a fresh allocation
    c = parallel.workspace(1000, np.float64)
    assert c.dtype == np.float64 and c.size == 1000
    d = parallel.workspace(4000, np.float64)  # grown
    assert d.size == 4000
