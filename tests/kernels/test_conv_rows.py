"""A single sample's convolution compiled whole per thread (ops/rows.py): its output-row blocks and its channel
halves give the values of the Python bands and halves they replace, bit for bit, and PyTorch's."""

import numpy as np
import pytest

from ember.kernels import conv, gemm, parallel
from ember.kernels.conv import direct, rows
from ember.ops import conv as conv_ops

pytest.importorskip("numba")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not rows.available(), reason="Ember's GEMM does not run here")


@pytest.fixture(params=[1, 2], ids=["one worker", "two workers"])
def workers(request, monkeypatch, thresholds):
    if request.param > parallel.get_num_threads():
        pytest.skip("one core")
    monkeypatch.setitem(parallel._state, "workers", request.param)
    thresholds(parallel.THRESHOLDS, min_python_chunk_flops=0, min_kernel_chunk_flops=0)
    monkeypatch.setattr(direct, "_MAX_CHANNEL_PRODUCT", 0)  # the bands by im2col, not the direct kernel
    monkeypatch.setattr(direct, "_fold", lambda *a: 1)
    # the Python paths' products on Ember's GEMM too, small ones included, as the kernels' are (NumPy's BLAS rounds
    # apart; plain products stay on it where its AVX-512 kernels run, which the kernels here do not)
    monkeypatch.setattr(gemm, "MIN_FLOPS", 0)
    monkeypatch.setitem(gemm._state, "own", True)
    return request.param


def _torch_conv(x, w, stride, padding, dilation):
    pt, pb, pl, pr = padding
    tx = torch.nn.functional.pad(torch.tensor(x, dtype=torch.float64), (pl, pr, pt, pb))
    return torch.nn.functional.conv2d(tx, torch.tensor(w, dtype=torch.float64), stride=stride,
                                      dilation=dilation).numpy()


def _without_kernels(monkeypatch, fn, *args):
    with monkeypatch.context() as m:
        m.setattr(rows, "available", lambda: False)
        return fn(*args)


@pytest.mark.parametrize("channels,out_channels,size,kernel,stride,padding,dilation", [
    (3, 16, 61, 7, 2, (3, 3, 3, 3), 1),    # an image stem
    (8, 24, 40, 3, 2, (1, 1, 1, 1), 1),    # a stride-2 layer
    (8, 24, 40, 1, 2, (0, 0, 0, 0), 1),    # a 1x1 stride-2 shortcut
    (6, 16, 37, 4, 1, (2, 1, 0, 3), 1),    # uneven padding, an even kernel
    (5, 8, 45, 3, 1, (2, 2, 2, 2), 2),     # dilated
    (4, 8, 50, 5, 3, (0, 0, 1, 1), 1),     # stride 3
])
def test_output_row_blocks_match_the_python_bands(monkeypatch, workers, channels, out_channels, size, kernel, stride,
                                                  padding, dilation):
    monkeypatch.setattr(rows, "_BLOCK_BYTES", 4096)  # blocks of a row or two: many per thread
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, channels, size, size + 3)).astype(np.float32)
    w = rng.standard_normal((out_channels, channels, kernel, kernel)).astype(np.float32)
    args = (x, w, (stride, stride), padding, (dilation, dilation), 1)
    calls = []
    real = rows.forward
    monkeypatch.setattr(rows, "forward", lambda *a: calls.append(1) or real(*a))
    got = conv._forward_by_rows(*args)
    assert calls == [1]
    np.testing.assert_array_equal(got, _without_kernels(monkeypatch, conv._forward_by_rows, *args))
    want = _torch_conv(x, w, stride, padding, dilation)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("channels,out_channels,size,kernel,stride", [
    (64, 96, 14, 3, 1),   # ResNet-18's 14x14 layers, narrowed
    (65, 32, 20, 3, 2),   # an odd channel count: halves of 32 and 33
    (16, 8, 9, 5, 1),
])
def test_channel_halves_match_the_python_halves(monkeypatch, workers, channels, out_channels, size, kernel, stride):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    w = rng.standard_normal((out_channels, channels, kernel, kernel)).astype(np.float32)
    args = (x, w, (stride, stride), (1, 1, 1, 1), (1, 1))
    got = conv._forward_by_channel_halves(*args)
    np.testing.assert_array_equal(got, _without_kernels(monkeypatch, conv._forward_by_channel_halves, *args))
    want = _torch_conv(x, w, stride, (1, 1, 1, 1), 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_resnet18s_single_sample_layers_take_the_compiled_kernels(monkeypatch):
    """conv2d at batch 1 sends the stem and the stride-2 layer into 28x28 to the row blocks, the 14x14 layer to the
    halves; the values are PyTorch's."""
    if parallel.get_num_threads() < 2:
        pytest.skip("one core: nothing is split")
    taken = []
    for name in ("forward", "forward_by_channel_halves"):
        real = getattr(rows, name)
        monkeypatch.setattr(rows, name, lambda *a, _real=real, _name=name: taken.append(_name) or _real(*a))
    rng = np.random.default_rng(3)
    for x_shape, w_shape, stride, pad, want in [
        ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3, "forward"),
        ((1, 64, 56, 56), (128, 64, 3, 3), 2, 1, "forward"),
        ((1, 256, 14, 14), (256, 256, 3, 3), 1, 1, "forward_by_channel_halves"),
    ]:
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = (rng.standard_normal(w_shape) * 0.05).astype(np.float32)
        taken.clear()
        got = conv_ops._conv2d_op.kernel(np, x, w, (stride, stride), (pad,) * 4, (1, 1), 1)
        assert taken == [want]
        ref = _torch_conv(x, w, stride, (pad,) * 4, 1)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
