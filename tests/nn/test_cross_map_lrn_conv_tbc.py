"""CrossMapLRN2d (PyTorch's legacy LRN: its forward's values, and that forward's own gradient, checked by finite
differences, where PyTorch's hand-written backward is not it) and F.conv_tbc against PyTorch: values, gradients of
every input, reprs, the jit, the meta device and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

F = em.nn.functional
RNG = np.random.default_rng(0)


def _grads(out, tout, ours, theirs, rtol, atol) -> None:
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(tuple(tout.shape)).astype(out.dtype.np)
    out.backward(em.tensor(g))
    tout.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("channels, size, alpha, beta, k", [
    (8, 5, 1e-4, 0.75, 1), (8, 3, 0.3, 0.75, 1.5), (4, 5, 0.5, 0.5, 2.0), (7, 4, 0.2, 1.25, 1.0),
    (3, 7, 0.4, 0.75, 1.0), (10, 2, 0.3, 0.6, 1.0), (8, 6, 0.3, 0.75, 0.5), (1, 3, 0.3, 0.75, 1.0),
])
def test_cross_map_lrn2d_matches_torch(channels, size, alpha, beta, k, dtype) -> None:
    ours, theirs = em.nn.CrossMapLRN2d(size, alpha, beta, k), torch.nn.CrossMapLRN2d(size, alpha, beta, k)
    assert repr(ours) == repr(theirs)
    x = RNG.standard_normal((2, channels, 3, 4)).astype(dtype) * 2
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(ours(em.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=tol, atol=tol)
    if dtype == np.float64:  # the gradient is the forward's own
        assert em.autograd.gradcheck(lambda t: ours(t), (em.tensor(x[:1], requires_grad=True),))


def test_cross_map_lrn2d_gradient_differs_from_torchs_hand_written_one() -> None:
    # PyTorch's backward sums over a window one channel off its forward's: not that forward's derivative
    x = RNG.standard_normal((1, 6, 2, 2)) * 2
    e_in, t_in = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    em.nn.CrossMapLRN2d(3, 0.5)(e_in).sum().backward()
    torch.nn.CrossMapLRN2d(3, 0.5)(t_in).sum().backward()
    assert not np.allclose(e_in.grad.numpy(), t_in.grad.numpy())


def test_cross_map_lrn2d_is_not_local_response_norm() -> None:
    # the legacy running sum keeps channel 0 in every later channel's window
    x = RNG.standard_normal((1, 8, 2, 2))
    ours = em.nn.CrossMapLRN2d(3, 0.5)(em.tensor(x))
    assert not np.allclose(ours.numpy(), F.local_response_norm(em.tensor(x), 3, 0.5).numpy())


def test_cross_map_lrn2d_under_jit_on_meta_and_errors() -> None:
    layer = em.nn.CrossMapLRN2d(3, 0.2)
    step = em.jit(lambda x: layer(x).sum())
    for scale in (1.0, 3.0):
        x = em.tensor(RNG.standard_normal((2, 5, 3, 3)).astype(np.float32) * scale)
        assert abs(float(step(x)) - float(layer(x).sum())) < 1e-4
    assert tuple(layer(em.ones(2, 5, 3, 4, device="meta")).shape) == (2, 5, 3, 4)
    with pytest.raises(ValueError, match=r"CrossMapLRN2d: Expected input to be 4D, got 3D instead \(shape "
                                         r"\(5, 3, 4\)\)"):
        layer(em.ones(5, 3, 4))
    with pytest.raises(ValueError):
        torch.nn.CrossMapLRN2d(3, 0.2)(torch.ones(5, 3, 4))
    with pytest.raises(ValueError, match="CrossMapLRN2d: size must be a positive integer, got 0"):
        em.nn.CrossMapLRN2d(0)(em.ones(1, 2, 3, 3))


@pytest.mark.parametrize("time, batch, c_in, c_out, kernel, pad", [
    (7, 2, 3, 4, 3, 0), (7, 2, 3, 4, 3, 2), (5, 3, 2, 2, 1, 0), (6, 1, 4, 3, 4, -1), (4, 2, 3, 4, 6, 1),
    (3, 2, 2, 2, 6, 1), (3, 0, 2, 2, 2, 0),
])
def test_conv_tbc_matches_torch(time, batch, c_in, c_out, kernel, pad) -> None:
    arrays = [RNG.standard_normal(s) for s in ((time, batch, c_in), (kernel, c_in, c_out), (c_out,))]
    ours = [em.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, tout = F.conv_tbc(*ours, pad), torch.nn.functional.conv_tbc(*theirs, pad)
    assert tuple(out.shape) == tuple(tout.shape)
    _grads(out, tout, ours, theirs, 1e-10, 1e-10)


def test_conv_tbc_under_jit_and_on_meta() -> None:
    w, b = em.tensor(RNG.standard_normal((3, 4, 5))), em.tensor(RNG.standard_normal(5))
    step = em.jit(lambda x: F.conv_tbc(x, w, b, 1).sum())
    for scale in (1.0, 2.0):
        x = em.tensor(RNG.standard_normal((6, 2, 4)) * scale)
        assert abs(float(step(x)) - float(F.conv_tbc(x, w, b, 1).sum())) < 1e-9
    meta = [em.ones(*s, device="meta") for s in ((6, 2, 4), (3, 4, 5), (5,))]
    assert tuple(F.conv_tbc(*meta, 2).shape) == (8, 2, 5)


BAD_TBC = {  # shapes of input, weight, bias, pad; message; PyTorch raises RuntimeError too
    "2-D input": ((7, 3), (3, 3, 4), (4,), 0, r"conv_tbc: input must have 3 dims \(time, batch, in_channels\), got "
                                              r"shape \(7, 3\)"),
    "2-D weight": ((7, 2, 3), (3, 4), (4,), 0, r"conv_tbc: weight must have 3 dims \(kernel_width, in_channels, "
                                               r"out_channels\), got shape \(3, 4\)"),
    "2-D bias": ((7, 2, 3), (3, 3, 4), (1, 4), 0, r"bias must be 1-D with the weight's 4 output channels \(dim 2 of "
                                                  r"weight \(3, 3, 4\)\), got shape \(1, 4\)"),
    "bias of other channels": ((7, 2, 3), (3, 3, 4), (5,), 0, r"got shape \(5,\)"),
    "in_channels differ": ((7, 2, 3), (3, 4, 4), (4,), 0, r"conv_tbc: input dim 2 \(in_channels\) of shape "
                                                          r"\(7, 2, 3\) must equal dim 1 of weight \(3, 4, 4\)"),
    "kernel longer than the input": ((7, 2, 3), (9, 3, 4), (4,), 0, r"conv_tbc: kernel width 9 is longer than the "
                                                                    r"input's 7 steps padded by 0"),
}


@pytest.mark.parametrize("case", list(BAD_TBC))
def test_conv_tbc_errors(case: str) -> None:
    *shapes, pad, message = BAD_TBC[case]
    with pytest.raises(RuntimeError, match=message):
        F.conv_tbc(*(em.ones(*s) for s in shapes), pad)
    with pytest.raises(RuntimeError):
        torch.conv_tbc(*(torch.ones(*s) for s in shapes), pad)
