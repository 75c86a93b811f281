"""Direct convolution on the GEMM micro-kernel: which layers take it, its values and both gradients against
PyTorch, its error against float64, and a network trained through it against im2col and Winograd."""

import numpy as np
import pytest

from ember.kernels import conv, parallel, sgemm_microkernel
from ember.kernels.conv import direct, winograd
from ember.ops import conv as conv_ops

pytest.importorskip("numba")
torch = pytest.importorskip("torch")
if not direct.applies((2, 16, 8, 8), (16, 16, 3, 3), np.float32, (1, 1), (1, 1, 1, 1), (1, 1), 1):
    pytest.skip("no AVX-512 or AVX2 micro-kernel on this CPU", allow_module_level=True)

ONE = (1, 1)
AVX512 = sgemm_microkernel.BLOCK is sgemm_microkernel.AVX512
SAME = (1, 1, 1, 1)


@pytest.mark.parametrize("x_shape,w_shape,dtype,stride,padding,groups,want", [
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, ONE, SAME, 1, True),     # ResNet-20's first stage
    ((32, 32, 16, 16), (32, 32, 3, 3), np.float32, ONE, SAME, 1, True),     # its second
    ((32, 32, 8, 8), (64, 32, 3, 3), np.float32, ONE, SAME, 1, True),       # 2048 channel pairs
    ((32, 64, 16, 16), (64, 64, 3, 3), np.float32, ONE, SAME, 1, False),    # Winograd's fewer products win
    ((32, 64, 8, 8), (64, 64, 3, 3), np.float32, ONE, SAME, 1, AVX512),     # but not on a small map (AVX-512's 8 rows)
    ((32, 128, 8, 8), (128, 128, 3, 3), np.float32, ONE, SAME, 1, False),
    ((32, 8, 16, 16), (8, 8, 3, 3), np.float32, ONE, SAME, 1, True),
    ((32, 4, 16, 16), (16, 4, 3, 3), np.float32, ONE, SAME, 1, True),       # few input channels: K folds columns in
    ((64, 6, 14, 14), (16, 6, 5, 5), np.float32, ONE, (0, 0, 0, 0), 1, True),  # LeNet-5's second layer, folded
    ((64, 1, 28, 28), (6, 1, 5, 5), np.float32, ONE, (0, 0, 0, 0), 1, True),   # its first
    ((32, 3, 32, 32), (16, 3, 3, 3), np.float32, ONE, SAME, 1, True),       # ResNet-20's stem
    ((16, 6, 28, 28), (64, 6, 5, 5), np.float32, ONE, (2, 2, 2, 2), 1, True),  # K = 30 repays 64 channels
    ((16, 6, 28, 28), (128, 6, 5, 5), np.float32, ONE, (2, 2, 2, 2), 1, False),
    ((8, 3, 64, 64), (32, 3, 3, 3), np.float32, ONE, SAME, 1, False),       # K = 9 does not repay 32
    ((32, 3, 32, 32), (16, 3, 3, 3), np.float32, (2, 2), SAME, 1, False),   # folds only at stride 1
    ((1, 3, 64, 64), (16, 3, 9, 9), np.float32, ONE, (4, 4, 4, 4), 1, False),  # too wide a kernel to fold
    ((32, 16, 16, 16), (3, 16, 3, 3), np.float32, ONE, SAME, 1, True),      # 3 output channels fill a panel enough
    ((32, 16, 16, 16), (2, 16, 3, 3), np.float32, ONE, SAME, 1, False),     # 2 do not
    ((32, 16, 32, 32), (16, 16, 7, 7), np.float32, ONE, (3, 3, 3, 3), 1, False),
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float64, ONE, SAME, 1, False),
    ((32, 16, 32, 32), (32, 16, 3, 3), np.float32, (2, 2), SAME, 1, True),   # ResNet-20's stride-2 layers
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, (3, 3), SAME, 1, False),
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, (1, 2), SAME, 1, False),
    ((32, 16, 32, 32), (16, 8, 3, 3), np.float32, ONE, SAME, 2, False),
    ((32, 16, 32, 32), (16, 16, 5, 5), np.float32, ONE, (2, 2, 2, 2), 1, True),
    ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, ONE, (3, 0, 0, 0), 1, False),  # padding past the kernel
])
def test_which_layers_take_the_direct_convolution(x_shape, w_shape, dtype, stride, padding, groups, want):
    assert direct.applies(x_shape, w_shape, dtype, stride, padding, ONE, groups) is want


@pytest.mark.parametrize("g_shape,w_shape,stride,padding,want", [
    ((32, 32, 16, 16), (32, 16, 3, 3), (2, 2), SAME, True),       # ResNet-20's 16 -> 32 layer's input gradient
    ((32, 64, 8, 8), (64, 32, 3, 3), (2, 2), SAME, True),         # its 32 -> 64 one
    ((32, 64, 8, 8), (64, 64, 3, 3), (2, 2), SAME, False),        # 64 x 64: the channel product rule
    ((32, 32, 16, 16), (32, 16, 3, 3), (1, 1), SAME, False),      # stride 1 is a conv2d
    ((32, 32, 16, 16), (32, 16, 4, 4), (2, 2), SAME, False),      # a DCGAN's 4x4
    ((32, 32, 16, 16), (32, 16, 3, 3), (2, 2), (3, 0, 0, 0), False),
])
def test_which_transposed_convolutions_take_the_phases(g_shape, w_shape, stride, padding, want):
    assert direct.applies_transposed(g_shape, w_shape, np.float32, stride, padding, ONE, 1) is want


@pytest.mark.parametrize("output_padding", [0, 1])
def test_conv_transpose2d_with_stride_2_matches_torch(output_padding):
    """The user's op (a decoder's upsampling layer), bias and output padding included."""
    import ember as em

    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 24, 9, 7)).astype(np.float32)
    w = (rng.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    got = em.nn.functional.conv_transpose2d(em.tensor(x), em.tensor(w), em.tensor(b), stride=2, padding=1,
                                            output_padding=output_padding).numpy()
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=2,
                                                padding=1, output_padding=output_padding).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("x_shape,w_shape,padding", [
    ((64, 6, 14, 14), (16, 6, 5, 5), (0, 0, 0, 0)),  # LeNet-5's layers
    ((64, 1, 28, 28), (6, 1, 5, 5), (0, 0, 0, 0)),
    ((32, 3, 32, 32), (16, 3, 3, 3), SAME),          # ResNet-20's stem
])
def test_weight_gradients_take_it_whatever_the_input_channels(x_shape, w_shape, padding):
    """Their K is the positions: a weight gradient needs no input channel minimum, though its forward folds."""
    assert direct.applies(x_shape, w_shape, np.float32, ONE, padding, ONE, 1, weight_grad=True)
    assert direct._fold(x_shape, w_shape, ONE) == w_shape[3]
    assert direct._fold(x_shape, w_shape, (2, 2)) == 1


def test_the_weight_gradient_of_a_wide_layer_on_a_small_map_stays_with_winograd():
    shapes = ((32, 64, 8, 8), (64, 64, 3, 3), np.float32, ONE, SAME, ONE, 1)
    assert direct.applies(*shapes) is AVX512 and not direct.applies(*shapes, weight_grad=True)
    assert direct.applies((32, 32, 16, 16), (32, 32, 3, 3), np.float32, ONE, SAME, ONE, 1, weight_grad=True)


def test_a_wide_stride_2_weight_gradient_takes_the_direct_kernel_on_avx512_only():
    """On AVX2's block ResNet-20's 32 -> 64 stride-2 layer's weight gradient ran faster on im2col's GEMMs."""
    shapes = ((32, 32, 16, 16), (64, 32, 3, 3), np.float32, (2, 2), SAME, ONE, 1)
    assert direct.applies(*shapes)
    assert direct.applies(*shapes, weight_grad=True) is AVX512
    assert direct.applies((32, 16, 32, 32), (32, 16, 3, 3), np.float32, (2, 2), SAME, ONE, 1, weight_grad=True)


def _torch_conv_and_grads(x, w, stride, padding, g):
    pt, pb, pl, pr = padding
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (pl, pr, pt, pb)), tw, stride=stride)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("x_shape,out_channels,stride,padding", [
    ((4, 16, 16, 16), 16, 1, SAME),
    ((3, 9, 23, 17), 11, 1, SAME),           # odd sizes, channels off the 8-row panels
    ((5, 8, 21, 20), 12, 1, (0, 2, 1, 0)),   # uneven padding
    ((2, 10, 25, 24), 8, 1, (0, 0, 0, 0)),   # no padding: the pitch is the width
    ((3, 32, 5, 3), 40, 1, (2, 1, 2, 1)),    # a map narrower than the kernel's reach
    ((6, 17, 8, 8), 24, 1, SAME),            # more columns than one micro-kernel block in the weight gradient
    ((4, 16, 16, 16), 32, 2, SAME),          # ResNet-20's stride-2 layer, four phase planes
    ((3, 9, 23, 17), 11, 2, SAME),           # odd sizes: phases of unequal length
    ((5, 8, 21, 20), 12, 2, (0, 2, 1, 0)),
    ((2, 10, 25, 24), 8, 2, (0, 0, 0, 0)),   # the last input row and column read by no tap
    ((3, 32, 5, 3), 40, 2, (2, 1, 2, 1)),
    ((3, 32, 8, 8), 64, 1, SAME),            # a small map: positions as the micro-kernel's rows
    ((2, 16, 7, 9), 32, 1, SAME),            # the same, rows of 9 positions (a partial block) and 63 in all
    ((3, 64, 8, 8), 64, 1, SAME),            # ResNet-20's last stage: the forward here (AVX-512), the weight
    # gradient not
    ((2, 48, 4, 4), 48, 1, SAME),            # a 4 x 4 map: positions as rows on AVX2's block
    ((3, 32, 16, 16), 64, 2, SAME),          # ResNet-20's 32 -> 64 downsampling layer, the same
])
def test_values_and_both_gradients_match_torch(monkeypatch, workers, x_shape, out_channels, stride, padding, set_threads):
    if workers > parallel.get_num_threads():
        pytest.skip("one core")
    set_threads(workers)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], 3, 3)) * 0.2).astype(np.float32)
    attrs = dict(stride=(stride, stride), padding=padding, dilation=ONE, groups=1)
    if not direct.applies(x.shape, w.shape, x.dtype, (stride, stride), padding, ONE, 1):
        assert not AVX512 and x.shape[1] * out_channels > direct._MAX_CHANNEL_PRODUCT
        pytest.skip("Winograd's on AVX2's block")
    y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx = conv_ops._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    want_y, want_gx, want_gw = _torch_conv_and_grads(x, w, stride, padding, g)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=2e-5)
    scale = float(np.abs(want_gw).max())  # a sum over every position: float32 rounding grows with it
    np.testing.assert_allclose(gw, want_gw, rtol=1e-5, atol=2e-6 * scale)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("x_shape,out_channels,kernel,stride,padding", [
    ((4, 6, 14, 14), 16, 5, 1, (0, 0, 0, 0)),   # LeNet-5's second layer: forward folded, input gradient 16 -> 6
    ((2, 1, 28, 28), 6, 5, 1, (0, 0, 0, 0)),    # its first: one channel, K = 5
    ((3, 3, 17, 19), 16, 3, 1, SAME),           # ResNet-20's stem on odd sizes
    ((3, 5, 9, 11), 20, 5, 1, (2, 1, 0, 2)),    # uneven padding, channels off the panels
    ((2, 5, 8, 8), 64, 5, 1, (2, 2, 2, 2)),     # folded on a small map: positions as rows
    ((3, 16, 12, 12), 24, 5, 1, (2, 2, 2, 2)),  # 5x5 by taps
    ((3, 16, 13, 11), 12, 5, 2, (2, 2, 2, 2)),  # 5x5 at stride 2: nine phase taps, six, six and four
    ((3, 16, 10, 10), 4, 3, 1, SAME),           # four output channels; the input gradient 4 -> 16 folds
    ((2, 3, 3, 4), 16, 5, 1, (2, 2, 2, 2)),     # folded on a map narrower than the kernel
    ((2, 3, 1, 1), 16, 5, 1, (2, 2, 2, 2)),     # and on a single pixel
    ((2, 16, 6, 6), 16, 5, 2, (1, 2, 4, 0)),    # 5x5 at stride 2, uneven padding past the map's width
])
def test_folded_and_5x5_layers_match_torch(monkeypatch, workers, x_shape, out_channels, kernel, stride, padding, set_threads):
    if workers > parallel.get_num_threads():
        pytest.skip("one core")
    set_threads(workers)
    rng = np.random.default_rng(9)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], kernel, kernel)) * 0.2).astype(np.float32)
    attrs = dict(stride=(stride, stride), padding=padding, dilation=ONE, groups=1)
    if not direct.applies(x.shape, w.shape, x.dtype, (stride, stride), padding, ONE, 1):
        assert not AVX512 and x.shape[1] * out_channels > direct._MAX_CHANNEL_PRODUCT
        pytest.skip("Winograd's on AVX2's block")
    assert direct.applies(x.shape, w.shape, x.dtype, (stride, stride), padding, ONE, 1, weight_grad=True)
    y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx = conv_ops._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(kernel, kernel), **attrs)
    want_y, want_gx, want_gw = _torch_conv_and_grads(x, w, stride, padding, g)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=2e-5)
    scale = float(np.abs(want_gw).max())
    np.testing.assert_allclose(gw, want_gw, rtol=1e-5, atol=2e-6 * scale)


@pytest.mark.parametrize("x_shape,out_channels,kernel,padding", [
    ((2, 3, 9, 9), 16, 3, SAME),           # a 3-channel stem at stride 2
    ((2, 1, 11, 10), 6, 5, (2, 1, 0, 2)),  # one channel, 5x5, uneven padding
])
def test_stride_2_weight_gradients_of_few_channels_match_torch(x_shape, out_channels, kernel, padding):
    """Their forward (no fold at stride 2) stays with im2col; the weight gradient runs on the phases here."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], kernel, kernel)) * 0.2).astype(np.float32)
    two = (2, 2)
    assert not direct.applies(x.shape, w.shape, x.dtype, two, padding, ONE, 1)
    assert direct.applies(x.shape, w.shape, x.dtype, two, padding, ONE, 1, weight_grad=True)
    attrs = dict(stride=two, padding=padding, dilation=ONE, groups=1)
    y = conv_ops._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gw = conv_ops._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(kernel, kernel), **attrs)
    _, _, want_gw = _torch_conv_and_grads(x, w, 2, padding, g)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-5, atol=2e-6 * float(np.abs(want_gw).max()))


def test_small_maps_take_positions_as_rows_where_that_masks_fewer_lanes():
    if sgemm_microkernel.BLOCK is sgemm_microkernel.AVX512:  # 8 x 32 and 8 x 48
        assert direct._by_position(8, 8, 9, 64)         # 8 x 8: 8 row blocks of 8, not 72 positions in 96 columns
        assert direct._by_position(16, 16, 17, 32)      # 16 x 16: 32 blocks of 8 rows, not 272 in 288 columns
        assert not direct._by_position(32, 32, 33, 16)  # 1056 positions fill 22 blocks of 48 columns
    else:  # 4 x 24
        assert direct._by_position(4, 4, 5, 48)         # 4 x 4: 4 row blocks of 4, not 20 positions in 24 columns
        assert not direct._by_position(8, 8, 9, 64)     # a tie: 72 positions in 3 blocks of 24, 64 channels in 3
        assert not direct._by_position(16, 16, 17, 32)  # 272 positions in 288 columns, not 32 channels in 48
    assert not direct._by_position(8, 8, 9, 24)         # 24 channels do not fill the 16 x 16 transposing copy


@pytest.mark.parametrize("stride", [1, 2])
def test_the_forward_does_not_depend_on_the_thread_count(monkeypatch, stride, set_threads):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((7, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    outs = []
    for workers in (1, 2):
        set_threads(workers)
        outs.append(direct.conv2d(x, w, stride, SAME))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_error_against_float64_is_no_worse_than_im2cols():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 32, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((8, 32, 16, 16)).astype(np.float32)
    exact = conv_ops._conv2d_op.kernel(np, x.astype(np.float64), w.astype(np.float64), ONE, SAME, ONE, 1)
    im2col = conv._forward_split(x, w.reshape(1, 32, -1), 3, 3, ONE, SAME, ONE, 1)
    assert np.abs(direct.conv2d(x, w, 1, SAME) - exact).max() <= 2 * np.abs(im2col - exact).max()
    exact_gw = conv_ops._conv2d_weight_grad_op.kernel(np, x.astype(np.float64), g.astype(np.float64), ONE, SAME, ONE, 1,
                                                  (3, 3))
    im2col_gw = conv._weight_grad_split(x, g, 3, 3, ONE, SAME, ONE, 1).transpose(0, 2, 1).reshape(32, 32, 3, 3)
    assert np.abs(direct.weight_grad(x, g, 1, SAME, (3, 3)) - exact_gw).max() <= \
        2 * np.abs(im2col_gw - exact_gw).max()


def test_a_network_trains_the_same_through_direct_winograd_and_im2col(monkeypatch):
    """Five SGD steps of a four-layer network (a 5x5 layer on 3 channels, whose forward folds, then 3x3 ones, the
    third stride 2), learning rate and data changed between them: the same parameters whichever algorithm
    convolves."""
    import ember as em

    rng = np.random.default_rng(5)
    xs = rng.standard_normal((5, 8, 3, 16, 16)).astype(np.float32)
    target = rng.standard_normal((8, 8, 8, 8)).astype(np.float32)

    calls = []
    for name in ("conv2d", "weight_grad", "input_grad_stride2"):
        real = getattr(direct, name)
        monkeypatch.setattr(direct, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    kernels = direct._kernels

    def train(use_direct, winograd_channels):
        monkeypatch.setattr(direct, "_kernels", kernels if use_direct else lambda: None)
        monkeypatch.setattr(winograd, "_MIN_CHANNELS", winograd_channels)
        em.manual_seed(0)
        net = em.nn.Sequential(em.nn.Conv2d(3, 8, 5, padding=2), em.nn.ReLU(), em.nn.Conv2d(8, 16, 3, padding=1),
                               em.nn.ReLU(), em.nn.Conv2d(16, 16, 3, 2, 1), em.nn.ReLU(),
                               em.nn.Conv2d(16, 8, 3, padding=1))
        opt = em.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        for step in range(5):
            opt.param_groups[0]["lr"] = 0.05 / (step + 1)
            opt.zero_grad()
            loss = ((net(em.tensor(xs[step])) - em.tensor(target)) ** 2).mean()
            loss.backward()
            opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()]

    by_direct = train(True, 10**9)
    # per step: four forwards, the second and last layers' input gradients, the stride-2 one's by phases (the data
    # needs none), four weight gradients
    assert calls.count("conv2d") == 5 * 6 and calls.count("weight_grad") == 5 * 4
    assert calls.count("input_grad_stride2") == 5
    calls.clear()
    for other in (train(False, 8), train(False, 10**9)):  # Winograd, then im2col
        assert not calls
        for a, b in zip(by_direct, other):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_an_empty_batch_gives_an_empty_output_and_a_zero_weight_gradient():
    x = np.zeros((0, 16, 8, 8), np.float32)
    assert direct.conv2d(x, np.ones((16, 16, 3, 3), np.float32), 1, SAME).shape == (0, 16, 8, 8)
    np.testing.assert_array_equal(direct.weight_grad(x, x, 1, SAME, (3, 3)), np.zeros((16, 16, 3, 3)))
    folded = np.zeros((0, 3, 8, 8), np.float32)  # fewer than 8 input channels: the forward folds
    assert direct.conv2d(folded, np.ones((16, 3, 5, 5), np.float32), 1, (2, 2, 2, 2)).shape == (0, 16, 8, 8)


def test_the_numpy_backend_turns_it_off_at_any_time():
    from ember.graph.codegen import set_backend

    shapes = ((32, 16, 32, 32), (16, 16, 3, 3), np.float32, ONE, SAME, ONE, 1)
    assert direct.applies(*shapes)
    set_backend("numpy")
    try:
        assert not direct.applies(*shapes)
    finally:
        set_backend(None)
    assert direct.applies(*shapes)


def test_each_chunk_has_its_scratch_on_pages_of_its_own():
    xq, buf, none = direct._scratch(2, (1, 16, 1168), (16, 1088), (0, 16))
    assert [a.shape for a in (xq, buf, none)] == [(2, 1, 16, 1168), (2, 16, 1088), (2, 0, 16)]
    assert xq.ctypes.data % 4096 == 0 and xq.strides[0] == buf.strides[0] and xq.strides[0] % 4096 == 0
    assert xq.ctypes.data + xq[0].nbytes <= buf.ctypes.data < xq.ctypes.data + xq.strides[0]  # chunk 0's together
    assert all(a[k].flags.c_contiguous for a in (xq, buf) for k in range(2))
    one = direct._scratch(1, (1, 16, 1168), (16, 1088))
    assert all(a.flags.c_contiguous for a in one)
