"""nn.utils: gradient clipping and parameter vectors, against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.nn.utils import clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters

from .helpers import assert_close, copy_weights, randn

tnn = torch.nn


def _twin_with_grads(scale: float = 1.0):
    m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    tm = tnn.Sequential(tnn.Linear(4, 5), tnn.ReLU(), tnn.Linear(5, 3))
    copy_weights(m, tm)
    x = randn(6, 4) * scale
    (m(em.tensor(x)) ** 2).sum().backward()
    (tm(torch.tensor(x)) ** 2).sum().backward()
    return m, tm


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm) -> None:
    m, tm = _twin_with_grads()
    total = clip_grad_norm_(m.parameters(), max_norm, norm_type)
    ttotal = tnn.utils.clip_grad_norm_(tm.parameters(), max_norm, norm_type)
    assert_close(total, ttotal, rtol=1e-5)
    for p, tp in zip(m.parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad, rtol=1e-5)
    if max_norm < float(ttotal):
        after = clip_grad_norm_(m.parameters(), 1e9, norm_type)
        assert float(after) == pytest.approx(max_norm, rel=1e-4)


def test_clip_grad_norm_edge_cases() -> None:
    p = nn.Parameter(em.ones(3))
    assert float(clip_grad_norm_([p], 1.0)) == 0.0  # no gradients at all
    p.grad = em.tensor([3.0, 4.0, 0.0])
    assert float(clip_grad_norm_(p, 1.0)) == pytest.approx(5.0)  # a single tensor is accepted
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
    p.grad = em.tensor([float("inf"), 1.0, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_of_large_float16_gradients() -> None:
    """Squares of float16 gradients above 256 overflow: the total norm is computed in float32, as PyTorch's."""
    grads = [np.full(100, 300.0, np.float16), np.full(10, -2.0, np.float16)]
    ps = [nn.Parameter(em.zeros(*g.shape, dtype=em.float16)) for g in grads]
    tps = [tnn.Parameter(torch.zeros(*g.shape, dtype=torch.float16)) for g in grads]
    for p, tp, g in zip(ps, tps, grads):
        p.grad, tp.grad = em.tensor(g), torch.tensor(g)
    total, ttotal = clip_grad_norm_(ps, 1.0), tnn.utils.clip_grad_norm_(tps, 1.0)
    assert total.dtype == em.float16 and np.isfinite(float(total))
    assert float(total) == float(ttotal)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.grad.numpy().astype(np.float32), tp.grad.float().numpy(), rtol=2e-3)


def test_clip_grad_value_matches_torch() -> None:
    m, tm = _twin_with_grads(scale=3.0)
    clip_grad_value_(m.parameters(), 0.1)
    tnn.utils.clip_grad_value_(tm.parameters(), 0.1)
    for p, tp in zip(m.parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad)
        assert np.abs(p.grad.numpy()).max() <= 0.1 + 1e-7


def test_parameters_to_vector_round_trip() -> None:
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    tm = tnn.Sequential(tnn.Linear(3, 4), tnn.Linear(4, 2))
    copy_weights(m, tm)
    vec = parameters_to_vector(m.parameters())
    assert_close(vec, tnn.utils.parameters_to_vector(tm.parameters()))
    assert vec.shape == (sum(p.numel() for p in m.parameters()),)
    vec.sum().backward()  # differentiable
    assert all(np.all(p.grad.numpy() == 1) for p in m.parameters())
    new = em.arange(vec.shape[0], dtype=em.float32)
    params = list(m.parameters())
    vector_to_parameters(new, m.parameters())
    assert all(a is b for a, b in zip(params, m.parameters()))  # written in place
    assert_close(parameters_to_vector(m.parameters()), new.numpy())
    with pytest.raises(TypeError):
        vector_to_parameters([1.0], m.parameters())
