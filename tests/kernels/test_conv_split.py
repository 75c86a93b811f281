"""Convolutions split over the threads give the values they give unsplit: over the batch (forward, both gradients),
a single sample by bands of output rows or by halves of its input channels, and in a forked child."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import blas, conv, parallel, selection
from ember.kernels.conv import few_rows, winograd
from ember.ops import conv as conv_ops


@pytest.fixture
def two_workers(split_everything):
    """Two threads, and every convolution split however small."""


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 1, 1), (1, 0, 2), (3, 2, 4)])
def test_split_convolution_equals_unsplit(two_workers, set_threads, stride, padding, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8, 19, 17)).astype(np.float32)
    w = rng.standard_normal((12, 8 // groups, 3, 3)).astype(np.float32)
    attrs = dict(stride=(stride, stride), padding=(padding,) * 4, dilation=(1, 1), groups=groups)
    split_y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(split_y.shape).astype(np.float32)
    split_gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    split_gx = conv_ops._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    set_threads(1)
    y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    gx = conv_ops._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    np.testing.assert_allclose(split_y, y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split_gw, gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(split_gx, gx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels,kernel,stride,padding", [(1, 5, 1, 2), (3, 3, 2, 1), (3, 3, 1, 0)])
def test_split_weight_gradient_with_few_patch_rows_matches_torch(two_workers, channels, kernel, stride, padding):
    """Image layers (1-3 input channels) take a GEMM per sample, summed, for the weight's gradient: compiled where
    Numba is (test_conv_few_rows.py), else (and while it compiles) by batch chunks of patches on the threads."""
    torch = pytest.importorskip("torch")
    assert channels * kernel * kernel <= conv.CONV2D["wgrad_per_sample_max_rows"]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, channels, 21, 19)).astype(np.float32)
    w = rng.standard_normal((6, channels, kernel, kernel)).astype(np.float32)
    ty = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=padding)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    want = torch.ops.aten.convolution_backward(torch.tensor(g), torch.tensor(x), torch.tensor(w), None,
                                               [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], 1,
                                               [False, True, False])[1]
    attrs = ((stride, stride), (padding,) * 4, (1, 1), 1, (kernel, kernel))
    got = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, stride=attrs[0], padding=attrs[1], dilation=attrs[2],
                                                 groups=1, kernel_hw=attrs[4])
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv._run_wgrad_split(np, x, g, *attrs), want.numpy(), rtol=1e-4, atol=1e-4)
    # ahead of the direct convolution, which took these 2.1-2.4x as long on a Zen 4 (LeNet-5's and ResNet-20's first)
    chosen = selection.choose("conv2d_weight_grad", conv.CONV2D_WEIGHT_GRAD_ALGORITHMS, np, x, g, *attrs)
    assert chosen.name == ("few rows compiled" if few_rows.applies(x, g, attrs[0], attrs[2]) else "im2col by batch chunks")


def test_a_forked_child_makes_its_own_threads(two_workers):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:  # the child must not wait on the parent's (absent) pool threads
        assert pool.apply_async(_conv_in_child).get(timeout=60) == (5, 12, 15, 15)


def _conv_in_child():
    assert parallel.get_num_threads() == 2
    x = np.ones((5, 8, 19, 17), np.float32)
    return conv_ops._conv2d_op.kernel(np, x, np.ones((12, 8, 5, 3), np.float32), stride=(1, 1), padding=(0, 0, 0, 0),
                                  dilation=(1, 1), groups=1).shape


@pytest.mark.parametrize("channels,kernel,stride,padding,dilation,groups", [
    (3, 7, 2, 3, 1, 1),     # an image stem
    (16, 3, 1, 1, 1, 1),    # by Winograd's tile rows, or in bands by Winograd without Ember's GEMM
    (8, 3, 2, 1, 1, 1),
    (8, 3, 1, 2, 2, 1),
    (8, 5, 3, 0, 1, 2),
    (6, 4, 1, (2, 1), 1, 1),
])
def test_a_single_sample_split_by_output_rows_matches_torch(two_workers, channels, kernel, stride, padding,
                                                             dilation, groups):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, channels, 64, 59)).astype(np.float32)
    w = rng.standard_normal((16, channels // groups, kernel, kernel)).astype(np.float32)
    ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=(ph, pw),
                                      dilation=dilation, groups=groups).numpy()
    attrs = dict(stride=(stride, stride), padding=(ph, ph, pw, pw), dilation=(dilation, dilation), groups=groups)
    # Winograd's compiled kernel splits its tile rows itself, where it runs
    by_winograd = winograd.splits_tile_rows() and winograd.applies(x.shape, w.shape, x.dtype, **attrs)
    assert conv._rows_pay(x, w, attrs["stride"], attrs["padding"], attrs["dilation"]) is not by_winograd
    got = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,out_channels,kernel,stride", [
    ((1, 64, 14, 14), 96, 3, 1),  # ResNet-18's 14x14 layers, narrowed
    ((1, 65, 20, 20), 32, 3, 2),  # an odd channel count: halves of 32 and 33
])
def test_a_single_sample_split_by_input_channels_matches_torch_on_any_thread_count(set_threads, thresholds, shape,
                                                                                    out_channels, kernel, stride):
    """Maps too small to split by rows are split into two halves of the input channels, summed: values match
    PyTorch, and are the same bit for bit on one thread or two (one thread runs BLAS on one thread too, as each
    half's GEMM does)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], kernel, kernel)).astype(np.float32)
    thresholds(conv.CONV2D, halves_min_flops=0)
    attrs = dict(stride=(stride, stride), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
    assert conv._halves_pay(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], 1)
    if not blas.controllable() or parallel.cores() < 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here, or one core")
    results = []
    for threads in (1, 2):  # one thread: BLAS on one too
        set_threads(threads)
        results.append(conv_ops._conv2d_op.kernel(np, x, w, **attrs))
    np.testing.assert_array_equal(results[0], results[1])
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=1).numpy()
    np.testing.assert_allclose(results[1], want, rtol=1e-4, atol=1e-4)
    thresholds(conv.CONV2D, halves_min_channels=1 << 30)  # the one-GEMM path: the same values within rounding
    np.testing.assert_allclose(conv_ops._conv2d_op.kernel(np, x, w, **attrs), results[1], rtol=1e-4, atol=1e-4)
