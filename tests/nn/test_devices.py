"""Modules and functions on other devices: the logical cpu:1 always, cuda:0 where it is available."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.nn import functional as F

from .helpers import assert_close, randn

DEVICES = ["cpu:1"] + (["cuda"] if em.cuda.is_available() else [])


def _model():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 2 * 2, 6), nn.LayerNorm(6), nn.GELU(), nn.Dropout(0.0),
                         nn.Linear(6, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_model_on_device_matches_cpu(device) -> None:
    em.manual_seed(0)
    ref = _model()
    moved = _model()
    moved.load_state_dict(ref.state_dict())
    params = list(moved.parameters())
    moved.to(device)
    dev = em.device(device)
    assert all(a is b for a, b in zip(params, moved.parameters()))
    assert all(p.device == dev for p in moved.parameters())
    assert all(b.device == dev for b in moved.buffers())
    x, y = randn(4, 2, 4, 4), np.array([0, 1, 2, 1])
    loss = F.cross_entropy(ref(em.tensor(x)), em.tensor(y))
    dloss = F.cross_entropy(moved(em.tensor(x, device=device)), em.tensor(y, device=device))
    assert dloss.device == dev
    assert_close(dloss.cpu(), loss.detach().numpy(), atol=1e-5)
    loss.backward()
    dloss.backward()
    for (name, p), q in zip(ref.named_parameters(), moved.parameters()):
        assert q.grad.device == dev, name
        assert_close(q.grad.cpu(), p.grad.numpy(), atol=1e-5, what=name)
    assert_close(moved[1].running_mean.cpu(), ref[1].running_mean.numpy())
    moved.cpu()
    assert moved[0].weight.device == em.device("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_functions_create_helpers_on_the_input_device(device) -> None:
    dev = em.device(device)
    q = em.randn(1, 2, 3, 4, device=device)
    assert F.scaled_dot_product_attention(q, q, q, is_causal=True).device == dev
    assert F.dropout(q, 0.5).device == dev
    assert F.interpolate(q, scale_factor=2, mode="bilinear").device == dev
    assert F.interpolate(q, size=(5, 5)).device == dev
    emb = nn.Embedding(5, 3, padding_idx=0, max_norm=1.0).to(device)
    assert emb(em.tensor([[0, 1, 4]], device=device)).device == dev
    w = em.tensor([1.0, 2.0, 3.0], device=device)
    loss = F.cross_entropy(em.randn(4, 3, device=device), em.tensor([0, 1, 2, -100], device=device), weight=w,
                           label_smoothing=0.1)
    assert loss.device == dev
    p = nn.Parameter(em.randn(3, device=device))
    p.grad = em.ones(3, device=device)
    assert nn.utils.clip_grad_norm_([p], 1.0).device == dev
