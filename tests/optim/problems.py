"""A small tanh MLP regression written in both Ember and PyTorch, and helpers that train it with an
optimizer in each framework so their parameter trajectories can be compared step by step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

import ember as em
from ember import optim

SHAPES = [(5, 3), (5,), (2, 5), (2,)]  # W1, b1, W2, b2


def initial_params(seed: int = 0) -> list[np.ndarray]:
    """Random float64 starting values for the MLP's parameters."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 0.7 for s in SHAPES]


def data(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (16, 3) and targets (16, 2)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 3))
    return x, np.sin(x[:, :2] * 2.0) + 0.1 * rng.standard_normal((16, 2))


def ember_loss(params, x, y):
    """Mean squared error of the MLP, in Ember."""
    w1, b1, w2, b2 = params
    out = em.tanh(x @ w1.T + b1) @ w2.T + b2
    return ((out - y) ** 2).mean()


def torch_loss(params, x, y):
    """Mean squared error of the MLP, in PyTorch."""
    w1, b1, w2, b2 = params
    out = torch.tanh(x @ w1.T + b1) @ w2.T + b2
    return ((out - y) ** 2).mean()


def _groups(params: list, groups: list[dict] | None) -> list:
    if groups is None:
        return params
    return [{**g, "params": [params[i] for i in g["params"]]} for g in groups]


def ember_setup(name: str, kwargs: dict, groups: list[dict] | None = None, dtype=np.float64, seed: int = 0):
    """Ember parameters (leaf tensors requiring grad) and an optimizer over them."""
    params = [em.tensor(a.astype(dtype), requires_grad=True) for a in initial_params(seed)]
    return params, getattr(optim, name)(_groups(params, groups), **kwargs)


def torch_setup(name: str, kwargs: dict, groups: list[dict] | None = None, dtype=np.float64, seed: int = 0):
    """PyTorch parameters and its single-tensor (foreach=False) optimizer over them."""
    params = [torch.tensor(a.astype(dtype), requires_grad=True) for a in initial_params(seed)]
    return params, getattr(torch.optim, name)(_groups(params, groups), foreach=False, **kwargs)


def ember_train(params, opt, steps: int, dtype=np.float64, skip: Callable[[int], list[int]] | None = None):
    """Train for `steps` steps on the MLP; returns the parameter values after each step."""
    x, y = (em.tensor(a.astype(dtype)) for a in data())
    trajectory = []
    for k in range(steps):
        opt.zero_grad()
        ember_loss(params, x, y).backward()
        for i in skip(k) if skip else ():
            params[i].grad = None
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


def torch_train(params, opt, steps: int, dtype=np.float64, skip: Callable[[int], list[int]] | None = None):
    """Train for `steps` steps on the MLP in PyTorch; returns the parameter values after each step."""
    x, y = (torch.tensor(a.astype(dtype)) for a in data())
    trajectory = []
    for k in range(steps):
        opt.zero_grad()
        torch_loss(params, x, y).backward()
        for i in skip(k) if skip else ():
            params[i].grad = None
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


def gradient_sequence(steps: int, seed: int = 2, dtype=np.float32) -> list[list[np.ndarray]]:
    """Random gradients, one set per step, independent of the parameters."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def feed(params, opt, grads: list[list[np.ndarray]], to_tensor: Callable) -> list[list[np.ndarray]]:
    """Step `opt` with the given gradients (no loss); returns the parameters after each step."""
    trajectory = []
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = to_tensor(g)
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


def assert_trajectories_close(ours, theirs, rtol: float, atol: float) -> None:
    """Every parameter agrees at every step."""
    assert len(ours) == len(theirs)
    for k, (a_step, b_step) in enumerate(zip(ours, theirs)):
        for i, (a, b) in enumerate(zip(a_step, b_step)):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {k + 1}, parameter {i}")
