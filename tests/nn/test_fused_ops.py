"""The fused primitives behind nn (ember.ops.nn_extra): finite differences, second derivatives, meta shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.nn import functional as F
from ember.ops import nn_extra

from .helpers import RNG, assert_close

tF = torch.nn.functional


def _f64(*shape, requires_grad: bool = True) -> em.Tensor:
    return em.tensor(RNG.standard_normal(shape), dtype=em.float64, requires_grad=requires_grad)


def test_linear_gradcheck() -> None:
    x, w, b = _f64(3, 4), _f64(2, 4), _f64(2)
    assert em.autograd.gradcheck(nn_extra.linear, (x, w, b))
    assert em.autograd.gradcheck(nn_extra.linear, (_f64(2, 3, 4), w, None))
    assert em.autograd.gradcheck(nn_extra.linear, (_f64(4), w, b))


def test_batch_norm_gradcheck_including_statistics() -> None:
    x, w, b = _f64(4, 3, 2), _f64(3), _f64(3)
    assert em.autograd.gradcheck(lambda *a: nn_extra.batch_norm_train(*a, eps=1e-3), (x, w, b))
    assert em.autograd.gradcheck(lambda a: nn_extra.batch_norm_train(a, None, None), (_f64(5, 2),))


def test_layer_norm_gradcheck_including_statistics() -> None:
    x, w, b = _f64(3, 2, 4), _f64(2, 4), _f64(2, 4)
    assert em.autograd.gradcheck(lambda *a: nn_extra.layer_norm(a[0], 2, a[1], a[2], 1e-3), (x, w, b))
    assert em.autograd.gradcheck(lambda a: nn_extra.layer_norm(a, 1), (_f64(3, 5),))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_gradcheck(reduction) -> None:
    logp = _f64(5, 4, 2)
    target = em.tensor(RNG.integers(0, 4, (5, 2)))
    target[0, 0] = -100
    weight = em.tensor(np.abs(RNG.standard_normal(4)) + 0.1, dtype=em.float64)
    assert em.autograd.gradcheck(lambda a: nn_extra.nll_loss(a, target, weight, reduction=reduction), (logp,))


def _second_derivative(em_fn, t_fn, *arrays) -> None:
    """d/dx of sum(dL/dx * v): compares Hessian-vector products with PyTorch."""
    e_in = [em.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    (ge,) = em.autograd.grad(em_fn(*e_in), [e_in[0]], create_graph=True)
    (gt,) = torch.autograd.grad(t_fn(*t_in), [t_in[0]], create_graph=True)
    assert_close(ge, gt, atol=1e-10, rtol=1e-8)
    v = RNG.standard_normal(arrays[0].shape)
    he = em.autograd.grad((ge * em.tensor(v)).sum(), e_in)
    ht = torch.autograd.grad((gt * torch.tensor(v)).sum(), t_in)
    for a, b in zip(he, ht):
        assert_close(a, b, atol=1e-9, rtol=1e-7)


def test_second_derivatives_match_torch() -> None:
    x = RNG.standard_normal((4, 5))
    target = RNG.integers(0, 5, 4)
    _second_derivative(lambda a: F.cross_entropy(a, em.tensor(target)),
                       lambda a: tF.cross_entropy(a, torch.tensor(target)), x)
    _second_derivative(lambda a, w, b: (F.layer_norm(a, (5,), w, b) ** 3).sum(),
                       lambda a, w, b: (tF.layer_norm(a, (5,), w, b) ** 3).sum(),
                       x, RNG.standard_normal(5), RNG.standard_normal(5))
    _second_derivative(lambda a, w, b: (F.batch_norm(a, None, None, w, b, training=True) ** 3).sum(),
                       lambda a, w, b: (tF.batch_norm(a, None, None, w, b, training=True) ** 3).sum(),
                       x, RNG.standard_normal(5), RNG.standard_normal(5))
    _second_derivative(lambda a, w, b: (F.linear(a, w, b) ** 3).sum(),
                       lambda a, w, b: (tF.linear(a, w, b) ** 3).sum(),
                       x, RNG.standard_normal((3, 5)), RNG.standard_normal(3))


def test_meta_shapes() -> None:
    x = em.zeros(8, 3, 5, 5, device="meta")
    y, mean, var = nn_extra.batch_norm_train(x, em.zeros(3, device="meta"), None)
    assert y.shape == (8, 3, 5, 5) and mean.shape == (3,) and var.shape == (3,)
    y, mean, rstd = nn_extra.layer_norm(x, 2)
    assert y.shape == x.shape and mean.shape == (8, 3, 1, 1)
    assert nn_extra.linear(em.zeros(2, 7, 4, device="meta"), em.zeros(6, 4, device="meta")).shape == (2, 7, 6)
    logp = em.zeros(4, 10, device="meta")
    t = em.zeros(4, dtype=em.int64, device="meta")
    assert nn_extra.nll_loss(logp, t).shape == ()
    assert nn_extra.nll_loss(logp, t, reduction="none").shape == (4,)
    with pytest.raises(ValueError, match="linear"):
        nn_extra.linear(em.zeros(2, 5, device="meta"), em.zeros(6, 4, device="meta"))


def test_shape_errors_name_the_op() -> None:
    with pytest.raises(ValueError, match="linear: input"):
        F.linear(em.randn(2, 5), em.randn(3, 4))
    with pytest.raises(ValueError, match="batch_norm: weight"):
        F.batch_norm(em.randn(4, 3), None, None, em.ones(2), None, training=True)
    with pytest.raises(ValueError, match="nll_loss"):
        nn_extra.nll_loss(em.randn(4, 3), em.zeros(5, dtype=em.int64))
