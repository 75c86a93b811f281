"""nn.utils.parametrize and nn.utils.parametrizations against PyTorch: weight_norm and spectral_norm as
parametrizations over training steps (state dicts, gradients, the power iteration's buffers), removal, a user's own
parametrization with right_inverse (PyTorch's tutorial's symmetric matrices), chaining, the setter, cached(), the jit
and errors."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrizations as torch_parametrizations
from torch.nn.utils import parametrize as torch_parametrize

import ember as em
from tests.nn.helpers import assert_close, copy_weights, randn, train_both

parametrize = em.nn.utils.parametrize
parametrizations = em.nn.utils.parametrizations

LAYERS = {
    "linear": (lambda L: L.nn.Linear(4, 3), (5, 4)),
    "conv2d": (lambda L: L.nn.Conv2d(2, 3, 3), (1, 2, 5, 5)),
    "conv_transpose2d": (lambda L: L.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 3, 3)),
}


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
def test_parametrizations_match_torch(layer: str, kind: str) -> None:
    build, shape = LAYERS[layer]
    ours, theirs = build(em), build(torch)
    getattr(parametrizations, kind)(ours)
    getattr(torch_parametrizations, kind)(theirs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    copy_weights(ours, theirs)
    assert type(ours).__name__ == type(theirs).__name__ and isinstance(ours, type(build(em)))
    train_both(ours, theirs, shape)
    ours.eval()
    theirs.eval()
    train_both(ours, theirs, shape, steps=1)
    parametrize.remove_parametrizations(ours, "weight")
    torch_parametrize.remove_parametrizations(theirs, "weight")
    assert type(ours) is type(build(em)) and sorted(ours.state_dict()) == sorted(theirs.state_dict())
    assert_close(ours.weight, theirs.weight, 1e-6, 1e-5, "weight after removal")


class _Symmetric:
    """PyTorch's tutorial's parametrization: a symmetric matrix from an upper triangle."""

    @staticmethod
    def build(lib):
        class Symmetric(lib.nn.Module):
            def forward(self, x):
                return x.triu() + x.triu(1).transpose(-1, -2)

            def right_inverse(self, a):
                return a.triu()

        return Symmetric()


def test_a_users_parametrization_with_right_inverse() -> None:
    ours, theirs = em.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    copy_weights(ours, theirs)
    parametrize.register_parametrization(ours, "weight", _Symmetric.build(em))
    torch_parametrize.register_parametrization(theirs, "weight", _Symmetric.build(torch))
    w = ours.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    train_both(ours, theirs, (2, 3))
    target = randn(3, 3)
    target = target + target.T
    ours.weight = em.tensor(target)  # the setter: the original becomes right_inverse(target)
    theirs.weight = torch.tensor(target)
    assert_close(ours.weight, theirs.weight, 1e-6, 1e-6, "weight after assignment")
    assert_close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original, 1e-6, 1e-6, "original")


def test_chained_parametrizations_cached_reads_and_the_jit() -> None:
    layer = em.nn.Linear(3, 3)
    parametrize.register_parametrization(layer, "weight", _Symmetric.build(em))
    calls = []

    class Doubled(em.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    parametrize.register_parametrization(layer, "weight", Doubled())
    w = layer.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    original = layer.parametrizations.weight.original.detach().numpy()
    np.testing.assert_allclose(w, 2 * (np.triu(original) + np.triu(original, 1).T), rtol=1e-6)
    calls.clear()
    with parametrize.cached():
        first, second = layer.weight, layer.weight
    assert first is second and len(calls) == 1
    step = em.jit(lambda x: layer(x).sum())
    x = em.tensor(randn(2, 3))
    for scale in (1.0, 3.0):
        with em.no_grad():
            layer.parametrizations.weight.original.mul_(scale)
        assert abs(float(step(x)) - float(layer(x).sum())) < 1e-4
    assert copy.deepcopy(layer).weight.shape == layer.weight.shape


def test_parametrize_errors() -> None:
    class Widen(em.nn.Module):
        def forward(self, x):
            return em.cat([x, x])

    with pytest.raises(ValueError, match=r"register_parametrization: the parametrization changes weight's shape"):
        parametrize.register_parametrization(em.nn.Linear(2, 2), "weight", Widen())
    with pytest.raises(ValueError, match="register_parametrization: Linear has no parameter or buffer 'scale'"):
        parametrize.register_parametrization(em.nn.Linear(2, 2), "scale", Widen())
    with pytest.raises(ValueError, match="remove_parametrizations: Linear has no parametrization on 'weight'"):
        parametrize.remove_parametrizations(em.nn.Linear(2, 2), "weight")
    layer = parametrize.register_parametrization(em.nn.Linear(2, 2), "weight", Widen(), unsafe=True)
    assert tuple(layer.weight.shape) == (4, 2)
    assert parametrize.type_before_parametrizations(layer) is em.nn.Linear
