"""Winograd F(2x2, 3x3) convolution: which layers take it, and its values and both gradients against PyTorch."""

import numpy as np
import pytest

from ember.kernels import conv, gemm, parallel
from ember.kernels.conv import direct, winograd
from ember.ops import conv as conv_ops

pytest.importorskip("numba")
torch = pytest.importorskip("torch")

ONE = (1, 1)


@pytest.fixture(autouse=True)
def _no_direct_convolution(monkeypatch):
    """Layers with few channels convolve directly (test_direct_conv.py); here they go to Winograd."""
    monkeypatch.setattr(direct, "_MAX_CHANNEL_PRODUCT", 0)


@pytest.mark.parametrize("x_shape,w_shape,dtype,stride,groups,want", [
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, ONE, 1, True),     # ResNet-20's first stage
    ((32, 512, 7, 7), (512, 512, 3, 3), np.float32, ONE, 1, True),    # ResNet-18's last, batch 32
    ((4, 512, 7, 7), (512, 512, 3, 3), np.float32, ONE, 1, False),    # 64 tiles: a 16 MB weight transform not repaid
    ((1, 128, 14, 28), (128, 128, 3, 3), np.float32, ONE, 1, True),   # 98 tiles of a 1 MB one: a single sample's band
    ((1, 256, 14, 14), (256, 256, 3, 3), np.float32, ONE, 1, False),  # 49 tiles
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float64, ONE, 1, False),    # float64 keeps im2col's rounding
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, (2, 2), 1, False),
    ((32, 16, 32, 32), (16, 8, 3, 3), np.float32, ONE, 2, False),
    ((32, 3, 32, 32), (16, 3, 3, 3), np.float32, ONE, 1, False),      # an image layer's 3 channels
    ((32, 16, 32, 32), (16, 16, 5, 5), np.float32, ONE, 1, False),
])
def test_which_layers_take_winograd(x_shape, w_shape, dtype, stride, groups, want):
    assert winograd.applies(x_shape, w_shape, dtype, stride, (1, 1, 1, 1), ONE, groups) is want


def _torch_conv_and_grads(x, w, padding, g):
    pt, pb, pl, pr = padding
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (pl, pr, pt, pb)), tw)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("x_shape,out_channels,padding", [
    ((4, 16, 16, 16), 16, (1, 1, 1, 1)),
    ((3, 9, 23, 17), 11, (1, 1, 1, 1)),    # odd output sizes: the last tiles are cut
    ((5, 8, 21, 20), 12, (0, 2, 1, 0)),    # uneven padding
    ((2, 10, 25, 24), 8, (0, 0, 0, 0)),
    ((20, 32, 8, 8), 24, (1, 1, 1, 1)),    # several blocks per thread
])
def test_values_and_both_gradients_match_torch(monkeypatch, workers, x_shape, out_channels, padding, set_threads):
    if workers > parallel.get_num_threads():
        pytest.skip("one core")
    set_threads(workers)
    monkeypatch.setattr(winograd, "_MIN_BLOCK_TILES", 64)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], 3, 3)) * 0.2).astype(np.float32)
    attrs = dict(stride=ONE, padding=padding, dilation=ONE, groups=1)
    assert winograd.applies(x.shape, w.shape, x.dtype, ONE, padding, ONE, 1)
    y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx = conv_ops._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    want_y, want_gx, want_gw = _torch_conv_and_grads(x, w, padding, g)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=2e-5)
    scale = float(np.abs(want_gw).max())  # a sum over every position: float32 rounding grows with it
    np.testing.assert_allclose(gw, want_gw, rtol=1e-5, atol=2e-6 * scale)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("x_shape,out_channels,padding,block_tiles", [
    ((1, 16, 16, 16), 16, (1, 1, 1, 1), 128),
    ((1, 9, 23, 17), 11, (1, 1, 1, 1), 16),    # odd output sizes, several blocks per thread
    ((1, 8, 21, 20), 12, (0, 2, 1, 0), 16),    # uneven padding
    ((3, 9, 23, 17), 11, (0, 0, 0, 0), 40),    # blocks that span two samples
    ((5, 32, 6, 6), 32, (1, 1, 1, 1), 64),     # every block spans samples
])
def test_the_tile_rows_kernel_keeps_the_batch_paths_values(monkeypatch, workers, x_shape, out_channels, padding,
                                                            block_tiles, set_threads):
    """conv3x3's compiled kernel (tile rows on each thread, the products on Ember's GEMM driver) gives the values of
    the path that blocks whole samples and multiplies through gemm.matmul, bit for bit, and PyTorch's. (Products too
    small for gemm.matmul to take Ember's kernel, 8 channels by 45 tiles, go to NumPy's BLAS there and round apart.)"""
    if not winograd.splits_tile_rows():
        pytest.skip("Ember's GEMM does not run here")
    if workers > parallel.get_num_threads():
        pytest.skip("one core")
    set_threads(workers)
    monkeypatch.setattr(winograd, "_BLOCK_BYTES", 0)  # blocks of _MIN_BLOCK_TILES tiles, so many per thread
    monkeypatch.setattr(winograd, "_MIN_BLOCK_TILES", block_tiles)
    rng = np.random.default_rng(6)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], 3, 3)) * 0.2).astype(np.float32)
    y = winograd.conv3x3(x, w, padding)
    monkeypatch.setattr(winograd, "_tile_rows_kernel", lambda: None)
    np.testing.assert_array_equal(y, winograd.conv3x3(x, w, padding))
    want, _, _ = _torch_conv_and_grads(x, w, padding, np.zeros(y.shape, np.float32))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("x_shape,out_channels,padding,block_tiles", [
    ((3, 9, 23, 17), 16, (1, 1, 1, 1), 16),   # odd sizes: the last tiles cut; a block per sample
    ((5, 8, 21, 20), 20, (0, 2, 1, 0), 64),   # uneven padding
    ((20, 32, 8, 8), 24, (1, 1, 1, 1), 64),   # several blocks per thread
])
def test_the_weight_gradient_kernel_keeps_the_python_paths_values(monkeypatch, workers, x_shape, out_channels,
                                                                   padding, block_tiles, set_threads, thresholds):
    """weight_grad3x3's compiled kernel (each thread's samples: tiles, products on the GEMM driver, block sums added)
    gives the values of the path whose chunks are Python, bit for bit, where both split alike and multiply on Ember's
    GEMM (gemm.matmul hands small products, and ones with under 16 output channels, to NumPy's BLAS)."""
    if winograd._weight_grad_kernel() is None:
        pytest.skip("Ember's GEMM does not run here")
    if workers > parallel.get_num_threads():
        pytest.skip("one core")
    set_threads(workers)
    thresholds(parallel.THRESHOLDS, min_python_chunk_flops=0, min_kernel_chunk_flops=0)
    monkeypatch.setattr(gemm, "MIN_FLOPS", 0)
    monkeypatch.setitem(gemm._state, "own", True)  # the Python path's products too (where OpenBLAS's AVX-512 run)
    monkeypatch.setattr(winograd, "_BLOCK_BYTES", 0)
    monkeypatch.setattr(winograd, "_MIN_BLOCK_TILES", block_tiles)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(x_shape).astype(np.float32)
    pt, pb, pl, pr = padding
    g = rng.standard_normal((x_shape[0], out_channels, x_shape[2] + pt + pb - 2, x_shape[3] + pl + pr - 2))
    g = g.astype(np.float32)
    got = winograd.weight_grad3x3(x, g, padding)
    monkeypatch.setattr(winograd, "_weight_grad_kernel", lambda: None)
    np.testing.assert_array_equal(got, winograd.weight_grad3x3(x, g, padding))


def test_a_single_large_sample_takes_winograds_tile_rows_rather_than_row_bands():
    """ResNet-18's 56x56 and 28x28 3x3 layers at batch 1: the rows split is for the layers Winograd does not take."""
    x, w = np.zeros((1, 64, 56, 56), np.float32), np.zeros((64, 64, 3, 3), np.float32)
    strided_w = np.zeros((128, 64, 3, 3), np.float32)
    assert conv._rows_pay(x, strided_w, (2, 2), (1, 1, 1, 1), ONE)
    assert conv._rows_pay(x, w, ONE, (1, 1, 1, 1), ONE) is not winograd.splits_tile_rows()


def test_error_against_float64_is_no_worse_than_im2cols():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 32, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    pad = (1, 1, 1, 1)
    exact = conv_ops._conv2d_op.kernel(np, x.astype(np.float64), w.astype(np.float64), ONE, pad, ONE, 1)
    fast = winograd.conv3x3(x, w, pad)
    im2col = conv._forward_split(x, w.reshape(1, 32, -1), 3, 3, ONE, pad, ONE, 1)
    assert np.abs(fast - exact).max() <= 2 * np.abs(im2col - exact).max()


def test_a_network_trains_the_same_through_winograd_and_im2col(monkeypatch):
    """Five SGD steps of a two-layer 3x3 network, learning rate changed between them: same parameters."""
    import ember as em

    rng = np.random.default_rng(5)
    x, target = rng.standard_normal((8, 8, 16, 16)).astype(np.float32), rng.standard_normal((8, 8, 16, 16))

    calls = []
    for name in ("conv3x3", "weight_grad3x3"):
        real = getattr(winograd, name)
        monkeypatch.setattr(winograd, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))

    def train(channels_for_winograd):
        monkeypatch.setattr(winograd, "_MIN_CHANNELS", channels_for_winograd)
        em.manual_seed(0)
        net = em.nn.Sequential(em.nn.Conv2d(8, 16, 3, padding=1), em.nn.ReLU(), em.nn.Conv2d(16, 8, 3, padding=1))
        opt = em.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        for step in range(5):
            opt.param_groups[0]["lr"] = 0.05 / (step + 1)
            opt.zero_grad()
            loss = ((net(em.tensor(x)) - em.tensor(target.astype(np.float32))) ** 2).mean()
            loss.backward()
            opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()]

    fast = train(8)
    # per step: two forwards, the second layer's input gradient (the data needs none), two weight gradients
    assert calls.count("conv3x3") == 5 * 3 and calls.count("weight_grad3x3") == 5 * 2
    calls.clear()
    slow = train(10**9)
    assert not calls
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "3e38 with random signs"])
@pytest.mark.parametrize("where", ["input", "gradient"])
def test_values_the_transforms_cannot_keep_are_computed_as_exact_sums_round(value, where):
    """inf - inf in Winograd's transforms would make NaN where the convolution's value is inf, and values near
    float32's largest would overflow where the outputs are in range: such inputs (and output gradients, for the
    weight's gradient) go to im2col. The oracle is PyTorch in float64, rounded to float32: with 3e38 a weight
    gradient's exact sums overflow, and float32 sums in any order give either sign of inf, or NaN (OpenBLAS's Haswell
    kernels: 1,600 of 2,304 entries on an AMD EPYC family 25 model 1); Ember sums those again in float64."""
    import ember as em

    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 16, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 1e-3).astype(np.float32)
    g = rng.standard_normal((4, 16, 12, 12)).astype(np.float32)
    target = x if where == "input" else g
    if value == "3e38 with random signs":
        target[...] = np.float32(3e38) * np.sign(rng.standard_normal(target.shape)).astype(np.float32)
    else:
        target[1, 3, 5, 6] = np.float32(value)
    assert winograd.applies(x.shape, w.shape, x.dtype, ONE, (1, 1, 1, 1), ONE, 1)
    ex, ew = em.tensor(x, requires_grad=True), em.tensor(w, requires_grad=True)
    ey = em.nn.functional.conv2d(ex, ew, padding=1)
    ey.backward(em.tensor(g))
    tx, tw = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w))
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g.astype(np.float64)))
    for got, want in ((ey, ty), (ex.grad, tx.grad), (ew.grad, tw.grad)):
        with np.errstate(over="ignore"):
            got, want = got.detach().numpy(), want.detach().numpy().astype(np.float32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        np.testing.assert_array_equal(np.sign(got[np.isinf(want)]), np.sign(want[np.isinf(want)]))
        finite = np.isfinite(want)
        scale = np.abs(want[finite]).max() if finite.any() else 1.0
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-5 * scale)


def test_finite_inputs_still_take_winograd():
    from ember import kernels

    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    import ember as em

    found = kernels.explain(em.nn.functional.conv2d, em.tensor(x), em.tensor(w), padding=1)
    assert found.algorithms("conv2d") == ["winograd"]
    x[0, 0, 0, 0] = np.inf
    found = kernels.explain(em.nn.functional.conv2d, em.tensor(x), em.tensor(w), padding=1)
    assert found.algorithms("conv2d") == ["im2col by batch chunks"] or found.algorithms("conv2d") == ["im2col per sample"] \
        or found.algorithms("conv2d") == ["im2col + one GEMM"]
