"""nn.utils' weight reparametrisations and fusions against PyTorch: weight_norm and spectral_norm over several
training steps (the weights and the power iteration's buffers change between them), their removal, and folding an
eval batch norm into a convolution or linear layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import assert_close, copy_weights, randn, train_both

pytestmark = pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")

LAYERS = {
    "linear": (lambda L: L.nn.Linear(4, 3), (5, 4)),
    "conv2d": (lambda L: L.nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
    "conv_transpose2d": (lambda L: L.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 4, 4)),
}


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(layer: str, dim) -> None:
    build, shape = LAYERS[layer]
    em_mod, t_mod = build(em), build(torch)
    copy_weights(em_mod, t_mod)
    em.nn.utils.weight_norm(em_mod, dim=dim)
    torch.nn.utils.weight_norm(t_mod, dim=dim)
    assert sorted(em_mod.state_dict()) == sorted(t_mod.state_dict())
    assert_close(em_mod.weight_g, t_mod.weight_g, 1e-6, 1e-6, "g")
    train_both(em_mod, t_mod, shape)
    em.nn.utils.remove_weight_norm(em_mod)
    torch.nn.utils.remove_weight_norm(t_mod)
    assert sorted(em_mod.state_dict()) == sorted(t_mod.state_dict()) == ["bias", "weight"]
    assert isinstance(em_mod.weight, em.nn.Parameter)
    train_both(em_mod, t_mod, shape, steps=1)


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("iterations", [1, 3])
def test_spectral_norm_matches_torch(layer: str, iterations: int) -> None:
    build, shape = LAYERS[layer]
    em_mod, t_mod = build(em), build(torch)
    em.nn.utils.spectral_norm(em_mod, n_power_iterations=iterations)
    torch.nn.utils.spectral_norm(t_mod, n_power_iterations=iterations)
    assert sorted(em_mod.state_dict()) == sorted(t_mod.state_dict())
    copy_weights(em_mod, t_mod)  # the same weight and the same starting u and v
    train_both(em_mod, t_mod, shape)  # training mode: a power-iteration step per forward
    em_mod.eval()
    t_mod.eval()
    train_both(em_mod, t_mod, shape, steps=2)  # eval: u and v as they are
    em.nn.utils.remove_spectral_norm(em_mod)
    torch.nn.utils.remove_spectral_norm(t_mod)
    assert sorted(em_mod.state_dict()) == sorted(t_mod.state_dict()) == ["bias", "weight"]
    assert_close(em_mod.weight, t_mod.weight, 1e-6, 1e-5, "weight after removal")


def test_spectral_norm_bounds_the_largest_singular_value() -> None:
    em.manual_seed(0)
    layer = em.nn.utils.spectral_norm(em.nn.Linear(20, 10), n_power_iterations=50)
    for _ in range(4):  # the estimate converges over the forwards' power-iteration steps
        layer(em.ones(1, 20))
    assert abs(np.linalg.svd(layer.weight.detach().numpy(), compute_uv=False)[0] - 1.0) < 1e-4


def test_weight_norm_under_jit_follows_the_parameters() -> None:
    layer = em.nn.utils.weight_norm(em.nn.Linear(4, 3))
    step = em.jit(lambda x: layer(x).sum())
    x = em.tensor(randn(2, 4))
    for scale in (1.0, 2.0, 0.5):
        with em.no_grad():
            layer.weight_g.copy_(layer.weight_g * scale)
        assert abs(float(step(x)) - float(layer(x).sum())) < 1e-5


def test_reparametrisation_errors() -> None:
    layer = em.nn.utils.weight_norm(em.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="weight_norm: Linear.weight already has weight norm"):
        em.nn.utils.weight_norm(layer)
    with pytest.raises(ValueError, match="remove_spectral_norm: spectral_norm of 'weight' not found in Linear"):
        em.nn.utils.remove_spectral_norm(layer)
    with pytest.raises(ValueError, match="spectral_norm: Linear has no parameter 'scale'"):
        em.nn.utils.spectral_norm(em.nn.Linear(2, 2), name="scale")


FUSIONS = {
    "conv": (lambda L: (L.nn.Conv2d(3, 4, 3, bias=False), L.nn.BatchNorm2d(4)), (2, 3, 6, 6), False),
    "conv with bias": (lambda L: (L.nn.Conv2d(3, 4, 3), L.nn.BatchNorm2d(4)), (2, 3, 6, 6), False),
    "transposed conv": (lambda L: (L.nn.ConvTranspose2d(3, 4, 3, stride=2), L.nn.BatchNorm2d(4)), (1, 3, 4, 4), True),
    "linear": (lambda L: (L.nn.Linear(5, 4), L.nn.BatchNorm1d(4)), (3, 5), None),
}


@pytest.mark.parametrize("name", list(FUSIONS))
def test_fusing_a_batch_norm_matches_torch(name: str) -> None:
    build, shape, transpose = FUSIONS[name]
    (conv, bn), (t_conv, t_bn) = build(em), build(torch)
    with torch.no_grad():  # statistics and affine parameters away from their defaults
        t_bn.running_mean.uniform_(-1, 1)
        t_bn.running_var.uniform_(0.5, 2)
        t_bn.weight.uniform_(0.5, 1.5)
        t_bn.bias.uniform_(-1, 1)
    copy_weights(conv, t_conv)
    copy_weights(bn, t_bn)
    for m in (conv, bn, t_conv, t_bn):
        m.eval()
    if transpose is None:
        fused, t_fused = em.nn.utils.fuse_linear_bn_eval(conv, bn), torch.nn.utils.fuse_linear_bn_eval(t_conv, t_bn)
    else:
        fused = em.nn.utils.fuse_conv_bn_eval(conv, bn, transpose)
        t_fused = torch.nn.utils.fuse_conv_bn_eval(t_conv, t_bn, transpose)
    x = randn(*shape)
    assert_close(fused.weight, t_fused.weight, 1e-6, 1e-5, "weight")
    assert_close(fused.bias, t_fused.bias, 1e-6, 1e-5, "bias")
    assert_close(fused(em.tensor(x)), bn(conv(em.tensor(x))), 1e-5, 1e-4, "fused against the two layers")
    assert isinstance(fused.weight, em.nn.Parameter) and fused is not conv


def test_fusion_refuses_training_mode() -> None:
    with pytest.raises(RuntimeError, match="fuse_conv_bn_eval: fusion is for eval mode only"):
        em.nn.utils.fuse_conv_bn_eval(em.nn.Conv2d(1, 2, 1), em.nn.BatchNorm2d(2))
    with pytest.raises(ValueError, match="fuse_linear_bn_eval: the linear layer's 3 outputs do not match"):
        em.nn.utils.fuse_linear_bn_eval(em.nn.Linear(2, 3).eval(), em.nn.BatchNorm1d(4).eval())


def test_clip_grad_norm_is_the_in_place_function() -> None:
    p = em.nn.Parameter(em.ones(4))
    p.grad = em.full((4,), 3.0)
    total = em.nn.utils.clip_grad_norm([p], 1.0)
    assert abs(float(total) - 6.0) < 1e-6 and abs(float(p.grad.norm()) - 1.0) < 1e-5
