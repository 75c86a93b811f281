"""The lazy layers against PyTorch's: reprs before and after the first input, the layer they become, an optimizer
built before the first forward training the shaped parameters, loading a state dict into a lazy layer, the
initialisation's bounds, and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import copy_weights, randn

LAYERS = {
    "LazyLinear": (lambda L: L.nn.LazyLinear(3), (2, 5)),
    "LazyConv1d": (lambda L: L.nn.LazyConv1d(4, 3, padding=1), (2, 3, 7)),
    "LazyConv2d": (lambda L: L.nn.LazyConv2d(4, 3, padding=1, groups=2), (1, 6, 5, 5)),
    "LazyConv3d": (lambda L: L.nn.LazyConv3d(2, 2, bias=False), (1, 3, 4, 4, 4)),
    "LazyConvTranspose1d": (lambda L: L.nn.LazyConvTranspose1d(4, 3, stride=2), (2, 3, 5)),
    "LazyConvTranspose2d": (lambda L: L.nn.LazyConvTranspose2d(2, 3, groups=1, dilation=2), (1, 3, 4, 4)),
    "LazyConvTranspose3d": (lambda L: L.nn.LazyConvTranspose3d(2, 2), (1, 3, 2, 3, 2)),
    "LazyConv2d unbatched": (lambda L: L.nn.LazyConv2d(4, 3), (3, 5, 5)),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_lazy_layer_matches_torch(name: str) -> None:
    build, shape = LAYERS[name]
    ours, theirs = build(em), build(torch)
    assert repr(ours) == repr(theirs) and ours.has_uninitialized_params()
    optimizer = em.optim.SGD(ours.parameters(), lr=0.1)  # built before the shapes are known, as PyTorch allows
    x = randn(*shape)
    ours(em.tensor(x))
    theirs(torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ and repr(ours) == repr(theirs)
    fan_in = math.prod(ours.weight.shape[1:])
    assert np.abs(ours.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in) + 1e-7  # kaiming_uniform(a=sqrt(5))
    copy_weights(ours, theirs)
    before = ours.weight.detach().numpy().copy()
    out, tout = ours(em.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    optimizer.step()
    assert not np.array_equal(ours.weight.detach().numpy(), before)  # the optimizer holds the shaped parameter
    fresh = build(em)
    fresh.load_state_dict({k: em.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})
    assert type(fresh).__name__ == type(theirs).__name__ and repr(fresh) == repr(theirs)
    np.testing.assert_allclose(fresh(em.tensor(x)).detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_errors() -> None:
    with pytest.raises(ValueError, match="LazyConv2d: the input's 3 channels do not divide into groups=2"):
        em.nn.LazyConv2d(4, 3, groups=2)(em.ones(1, 3, 5, 5))
    assert repr(em.nn.UninitializedParameter()) == "<UninitializedParameter>"
