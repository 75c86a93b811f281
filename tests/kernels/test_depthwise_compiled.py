"""Compiled depthwise convolution (Numba): forward, input and weight gradients against PyTorch and the NumPy path."""

import numpy as np
import pytest

import ember as em
from ember.graph import codegen
from ember.kernels.conv import depthwise
from ember.kernels.numba_loader import kernel_for

pytest.importorskip("numba")
torch = pytest.importorskip("torch")

CASES = [  # x shape, multiplier, kernel, stride, padding, dilation
    ((4, 8, 30, 30), 1, (3, 3), 1, 1, 1),  # MobileNet's stride-1 layer
    ((4, 8, 31, 29), 1, (3, 3), 2, 1, 1),  # its stride-2 layer, odd sizes
    ((3, 6, 33, 35), 2, (5, 3), (2, 1), (2, 0), (1, 2)),  # two filters per channel, asymmetric everything
    ((2, 16, 40, 24), 3, (3, 3), 3, 0, 2),
    ((4, 16, 33, 34), 1, (3, 3), 2, 3, 1),  # padding wider than the kernel: whole rows and columns of zeros
    ((4, 16, 27, 26), 1, (1, 4), (3, 2), (1, 2), (1, 2)),  # a one-row kernel, stride phases in both directions
    ((4, 8, 30, 40), 1, (3, 3), 2, 0, 1),  # stride 2 unpadded on rows of 20 column pairs: both phases in one loop
    ((2, 8, 20, 65), 1, (3, 3), 2, 1, 1),  # ... padded, an odd width
    ((16, 8, 33, 9), 1, (2, 2), 2, (0, 1), 1),  # rows of a few columns, padded on one side: a loop per phase
    ((32, 96, 28, 28), 1, (3, 3), 1, 1, 1),  # enough work (43 MFLOP) to split the planes over the batch threads
    ((2, 8, 32, 36), 2, (3, 3), 1, 2, 2),  # stride 1, two filters a channel, dilated: the adjoint kernel's input grad
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("x_shape,m,k,stride,padding,dilation", CASES)
def test_depthwise_matches_torch(dtype, backend, x_shape, m, k, stride, padding, dilation):
    rng = np.random.default_rng(0)
    c = x_shape[1]
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((c * m, 1) + k).astype(dtype)
    assert kernel_for(depthwise._SOURCE, "depthwise_forward", np, x.dtype, x.size) is not None
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding, dilation=dilation, groups=c)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    try:
        codegen.set_backend(backend)
        ex, ew = em.tensor(x, requires_grad=True), em.tensor(w, requires_grad=True)
        ey = em.nn.functional.conv2d(ex, ew, stride=stride, padding=padding, dilation=dilation, groups=c)
        ey.backward(em.tensor(g))
    finally:
        codegen.set_backend(None)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=tol["rtol"], atol=tol["atol"] * 10)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_transposed_matches_torch(stride):
    """conv_transpose2d with one output channel per group runs the depthwise adjoint kernel."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 12, 20, 20)).astype(np.float32)
    w = rng.standard_normal((12, 1, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=1,
                                                output_padding=stride - 1, groups=6)
    got = em.nn.functional.conv_transpose2d(em.tensor(x), em.tensor(w), stride=stride, padding=1,
                                            output_padding=stride - 1, groups=6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,adjoint", [(1, "conv2d of the flipped weight"), (2, "depthwise compiled")])
def test_depthwise_input_grad_runs_the_forward_kernel_on_the_flipped_weight_at_stride_1(stride, adjoint):
    """A stride-1 depthwise layer's input gradient is a depthwise convolution by the flipped weight: the forward
    kernel runs it (about half the adjoint kernel's time); stride 2 keeps the adjoint kernel. Both match PyTorch."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 32, 28, 28)).astype(np.float32)
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((4, 32, 28 // stride, 28 // stride)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.conv2d(tx, torch.tensor(w), stride=stride, padding=1, groups=32).backward(torch.tensor(g))
    ex = em.tensor(x, requires_grad=True)

    def step():
        ex.grad = None
        em.nn.functional.conv2d(ex, em.tensor(w), stride=stride, padding=1, groups=32).backward(em.tensor(g))

    found = em.kernels.explain(step)
    assert found.algorithms("conv_transpose2d") == [adjoint]
    if stride == 1:  # the flipped weight's convolution is itself depthwise
        assert found.algorithms("conv2d") == ["depthwise compiled"] * 2  # the layer and its input gradient
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_weight_grad_with_inf_where_a_tap_does_not_read_matches_torch(stride):
    """An inf in a plane's last column and row reaches only the taps that read it: the others' sums stay finite,
    as PyTorch's do (a kernel that summed over the phases' whole pitch made 0 * inf = NaN there)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 32, 28, 28)).astype(np.float32)
    x[:, :, -1, :] = np.inf
    x[:, :, :, -1] = -np.inf
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 32, 28 // stride, 28 // stride)).astype(np.float32)
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), tw, stride=stride, padding=1, groups=32).backward(torch.tensor(g))
    ew = em.tensor(w, requires_grad=True)

    def step():
        em.nn.functional.conv2d(em.tensor(x), ew, stride=stride, padding=1, groups=32).backward(em.tensor(g))

    assert em.kernels.explain(step).algorithms("conv2d_weight_grad") == ["depthwise compiled"]
    want = tw.grad.numpy()
    assert np.isfinite(want).any() and not np.isfinite(want).all()
    np.testing.assert_allclose(ew.grad.numpy(), want, rtol=1e-4, atol=1e-3)
