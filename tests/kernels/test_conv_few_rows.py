"""An image layer's weight gradient (few patch rows) as one compiled kernel per thread, a sample's patches at a time:
PyTorch's values for every layout it takes, on one thread and split, with inf and NaN where PyTorch has them, and
one sample's patches held per thread rather than a block of them."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

from ember.kernels import conv, selection
from ember.kernels.conv import few_rows
from ember.ops import conv as conv_ops

torch = pytest.importorskip("torch")


@pytest.fixture
def compiled():
    if not few_rows.applies(np.ones((1, 1, 8, 8), np.float32), np.ones((1, 1, 4, 4), np.float32), (1, 1), (1, 1)):
        pytest.skip("no Numba here")


def _want(x, g, w_shape, stride, padding, dilation):
    """PyTorch's weight gradient in float64 (symmetric padding, as PyTorch's convolution takes it)."""
    return torch.ops.aten.convolution_backward(
        torch.tensor(g, dtype=torch.float64), torch.tensor(x, dtype=torch.float64), torch.zeros(w_shape,
        dtype=torch.float64), None, list(stride), list(padding), list(dilation), False, [0, 0], 1,
        [False, True, False])[1].numpy()


def _layer(rng, n, c, o, k, stride, padding, dilation, dtype, hw=(21, 19)):
    x = rng.standard_normal((n, c) + hw).astype(dtype)
    oh = (hw[0] + 2 * padding[0] - dilation[0] * (k - 1) - 1) // stride[0] + 1
    ow = (hw[1] + 2 * padding[1] - dilation[1] * (k - 1) - 1) // stride[1] + 1
    g = rng.standard_normal((n, o, oh, ow)).astype(dtype)
    return x, g


def _weight_grad(x, g, k, stride, padding, dilation):
    return conv_ops._conv2d_weight_grad_op.kernel(np, x, g, stride=stride, padding=(padding[0],) * 2 + (padding[1],) * 2,
                                                 dilation=dilation, groups=1, kernel_hw=(k, k))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n,c,o,k,stride,padding,dilation", [
    (64, 1, 6, 5, (1, 1), (2, 2), (1, 1)),    # LeNet-5's first layer
    (9, 3, 16, 3, (1, 1), (1, 1), (1, 1)),    # ResNet-20's stem
    (5, 1, 5, 5, (1, 1), (0, 0), (1, 1)),     # unpadded; odd channel and row counts
    (7, 3, 32, 3, (2, 2), (1, 1), (1, 1)),    # a strided stem (MobileNetV2's)
    (3, 2, 7, 3, (2, 1), (0, 2), (2, 1)),     # uneven strides and padding, dilated
    (1, 3, 4, 3, (1, 1), (3, 3), (1, 1)),     # one sample, padding wider than the kernel
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_rows_weight_grad_matches_torch(compiled, set_threads, thresholds, threads, n, c, o, k, stride, padding,
                                            dilation, dtype):
    from ember.kernels import parallel

    set_threads(threads)
    thresholds(parallel.THRESHOLDS, min_kernel_chunk_flops=0)  # split however small, on two threads
    x, g = _layer(np.random.default_rng(n * 7 + c), n, c, o, k, stride, padding, dilation, dtype)
    assert c * k * k <= conv.CONV2D["wgrad_per_sample_max_rows"]
    chosen = selection.choose("conv2d_weight_grad", conv.CONV2D_WEIGHT_GRAD_ALGORITHMS, np, x, g, stride,
                              (padding[0],) * 2 + (padding[1],) * 2, dilation, 1, (k, k))
    assert chosen.name == "few rows compiled"
    got = _weight_grad(x, g, k, stride, padding, dilation)
    assert got.dtype == dtype and got.shape == (o, c, k, k)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, _want(x, g, (o, c, k, k), stride, padding, dilation), rtol=tol, atol=tol)


def test_asymmetric_padding_matches_the_padded_input(compiled):
    """(top, bottom, left, right) padding: the gradient of the input padded by hand, unpadded."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, 13, 11)).astype(np.float32)
    padding = (1, 3, 0, 2)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 3), (0, 2)))
    g = rng.standard_normal((4, 5, padded.shape[2] - 2, padded.shape[3] - 2)).astype(np.float32)
    got = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, stride=(1, 1), padding=padding, dilation=(1, 1), groups=1,
                                                kernel_hw=(3, 3))
    np.testing.assert_allclose(got, _want(padded, g, (5, 2, 3, 3), (1, 1), (0, 0), (1, 1)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_inf_and_nan_reach_the_weight_gradient_as_in_torch(compiled, stride):
    """Infs in two corners of the input and a NaN in the gradient: NaN and inf where PyTorch's float64 path has them
    (the taps that read a corner, the NaN's channel), finite elsewhere. (Its float32 path skips the padding, so a
    NaN output gradient times a padding zero does not reach the taps that read only padding there.)"""
    rng = np.random.default_rng(5)
    x, g = _layer(rng, 6, 1, 6, 5, stride, (2, 2), (1, 1), np.float32, hw=(16, 16))
    x[0, 0, 0, 0] = np.inf
    x[2, 0, 15, 15] = -np.inf
    g[4, 2, 1, 1] = np.nan
    got = _weight_grad(x, g, 5, stride, (2, 2), (1, 1))
    want = _want(x, g, (6, 1, 5, 5), stride, (2, 2), (1, 1))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    assert 0 < finite.sum() < want.size
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_one_samples_patches_are_held_not_a_blocks(compiled, set_threads):
    """LeNet-5's first layer at batch 64: the per-sample GEMM path held 4 MB blocks of patches (5 MB of that step's
    peak memory over two threads); this kernel holds one sample's, 78 KB."""
    set_threads(1)
    x, g = _layer(np.random.default_rng(0), 64, 1, 6, 5, (1, 1), (2, 2), (1, 1), np.float32, hw=(28, 28))
    _weight_grad(x, g, 5, (1, 1), (2, 2), (1, 1))  # compiled before measuring
    peak = []

    def measure():  # a new thread: its scratch is allocated afresh, and so counted
        tracemalloc.start()
        _weight_grad(x, g, 5, (1, 1), (2, 2), (1, 1))
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()

    thread = threading.Thread(target=measure)
    thread.start()
    thread.join()
    assert peak[0] < 256 << 10, peak[0]
