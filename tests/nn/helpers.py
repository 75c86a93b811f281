"""Shared helpers for the nn tests: run an Ember module and its PyTorch twin with the same weights."""

from __future__ import annotations

import numpy as np
import torch

import ember as em

RNG = np.random.default_rng(0)


def randn(*shape, dtype=np.float32) -> np.ndarray:
    """Standard-normal host data."""
    return RNG.standard_normal(shape).astype(dtype)


def to_torch(t: em.Tensor) -> torch.Tensor:
    """A torch copy of an Ember tensor's values."""
    return torch.tensor(np.array(t.detach().numpy()))


def to_ember(t: torch.Tensor) -> em.Tensor:
    """An Ember copy of a torch tensor's values."""
    return em.tensor(t.detach().numpy().copy())


def copy_weights(em_mod, t_mod) -> None:
    """Load the torch module's parameters and buffers into the Ember module (same keys)."""
    em_mod.load_state_dict({k: to_ember(v) for k, v in t_mod.state_dict().items()})


def assert_close(actual, expected, atol: float = 1e-5, rtol: float = 1e-4, what: str = "") -> None:
    """Compare an Ember tensor (or array) with a torch tensor (or array)."""
    a = np.asarray(actual.detach().numpy() if isinstance(actual, em.Tensor) else actual)
    e = np.asarray(expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, err_msg=what)


def compare_module(em_mod, t_mod, *inputs: np.ndarray, train: bool = True, backward: bool = True,
                   atol: float = 1e-5, rtol: float = 1e-4, sync: bool = True, **kwargs):
    """Forward (and backward with a random upstream gradient) through both modules and compare
    outputs, input gradients, parameter gradients and buffers. Returns the two outputs."""
    if sync:
        copy_weights(em_mod, t_mod)
    em_mod.train(train)
    t_mod.train(train)
    floats = [a.dtype.kind == "f" for a in inputs]
    e_in = [em.tensor(a, requires_grad=backward and f) for a, f in zip(inputs, floats)]
    t_in = [torch.tensor(a, requires_grad=backward and f) for a, f in zip(inputs, floats)]
    out = em_mod(*e_in, **kwargs)
    tout = t_mod(*t_in, **kwargs)
    assert_close(out, tout, atol, rtol, "forward")
    if backward:
        g = RNG.standard_normal(tuple(tout.shape)).astype(inputs[0].dtype if floats[0] else np.float32)
        out.backward(em.tensor(g))
        tout.backward(torch.tensor(g))
        for i, (a, b) in enumerate(zip(e_in, t_in)):
            if b.grad is not None:
                assert a.grad is not None, f"input {i} got no gradient"
                assert_close(a.grad, b.grad, atol, rtol, f"grad of input {i}")
        tparams = dict(t_mod.named_parameters())
        for name, p in em_mod.named_parameters():
            tp = tparams[name]
            if tp.grad is None:
                assert p.grad is None or not np.any(p.grad.numpy()), f"{name}: unexpected gradient"
            else:
                assert p.grad is not None, f"{name}: no gradient"
                assert_close(p.grad, tp.grad, atol, rtol, f"grad of {name}")
    tbufs = dict(t_mod.named_buffers())
    for name, b in em_mod.named_buffers():
        assert_close(b, tbufs[name], atol, rtol, f"buffer {name}")
    return out, tout


def train_both(em_mod, t_mod, shape, steps: int = 3, lr: float = 0.1) -> None:
    """Forward, backward and an SGD step in both modules, `steps` times, on fresh inputs of `shape`, comparing the
    outputs, every parameter's gradient and the whole state dict after each step."""
    for step in range(steps):
        x = randn(*shape)
        out, tout = em_mod(em.tensor(x)), t_mod(torch.tensor(x))
        assert_close(out, tout, 1e-5, 1e-5, f"output at step {step}")
        g = randn(*tout.shape)
        out.backward(em.tensor(g))
        tout.backward(torch.tensor(g))
        theirs = dict(t_mod.named_parameters())
        with em.no_grad(), torch.no_grad():
            for name, p in em_mod.named_parameters():
                assert_close(p.grad, theirs[name].grad, 1e-5, 1e-4, f"grad of {name} at step {step}")
                p -= lr * p.grad
                theirs[name] -= lr * theirs[name].grad
                p.grad, theirs[name].grad = None, None
        theirs_state = t_mod.state_dict()
        for name, value in em_mod.state_dict().items():
            assert_close(value, theirs_state[name], 1e-5, 1e-5, f"{name} after step {step}")
