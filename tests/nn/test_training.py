"""End to end: nn models train with ember.optim to the same parameters as PyTorch, and checkpoint cleanly."""

from __future__ import annotations

import numpy as np
import torch

import ember as em
from ember import nn, optim
from ember.nn import functional as F

from .helpers import assert_close, copy_weights, randn

tnn = torch.nn


def _cnn(n):
    return n.Sequential(n.Conv2d(1, 4, 3, padding=1), n.BatchNorm2d(4), n.ReLU(), n.MaxPool2d(2), n.Flatten(),
                        n.Linear(4 * 3 * 3, 8), n.LayerNorm(8), n.GELU(), n.Linear(8, 3))


def test_training_trajectory_matches_torch() -> None:
    model, tmodel = _cnn(nn), _cnn(tnn)
    copy_weights(model, tmodel)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        x, y = randn(6, 1, 6, 6), np.arange(6) % 3
        loss = F.cross_entropy(model(em.tensor(x)), em.tensor(y), label_smoothing=0.1)
        tloss = tnn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y), label_smoothing=0.1)
        assert_close(loss, tloss, atol=1e-5, what=f"loss at step {step}")
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        tnn.utils.clip_grad_norm_(tmodel.parameters(), 1.0)
        opt.step()
        topt.step()
    tstate = tmodel.state_dict()
    for k, v in model.state_dict().items():
        assert_close(v, tstate[k], atol=1e-4, rtol=1e-3, what=k)


def test_model_learns_a_separable_problem() -> None:
    em.manual_seed(0)
    x = em.randn(128, 2)
    y = (x[:, 0] * x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with em.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.95


def test_optimizer_survives_module_to(tmp_path) -> None:
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    model.to(em.float64)  # parameters keep their identity, so the optimizer still updates them
    before = model.weight.detach().clone()
    model(em.ones(1, 3, dtype=em.float64)).sum().backward()
    opt.step()
    assert not np.allclose(model.weight.detach().numpy(), before.numpy())


def test_checkpoint_round_trip(tmp_path) -> None:
    model = _cnn(nn)
    model(em.randn(4, 1, 6, 6))  # move the batch-norm running statistics
    path = tmp_path / "model.safetensors"
    em.save(model.state_dict(), path)
    clone = _cnn(nn)
    clone.load_state_dict(em.load(path))
    model.eval()
    clone.eval()
    x = em.randn(2, 1, 6, 6)
    assert_close(clone(x), model(x).detach().numpy())
    assert clone[1].num_batches_tracked.item() == 1
