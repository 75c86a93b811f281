"""Run an Ember sequence module and its PyTorch twin on the same weights and inputs; compare everything.

Modules here return tuples (output, state or weights), take tuples of states and bool masks, so the
helpers walk nested structures: float arrays become tensors that require grad, other arrays plain
tensors, tuples stay tuples and None stays None.
"""

from __future__ import annotations

import numpy as np
import torch

import ember as em

RNG = np.random.default_rng(1)
TOL = {np.float64: dict(atol=1e-10, rtol=1e-8), np.float32: dict(atol=2e-5, rtol=2e-4)}


def build(builder, dtype):
    """The (ember, torch) pair from builder(nn namespace), in dtype, with torch's weights in both."""
    torch.manual_seed(0)
    t_mod = builder(torch.nn).to(torch.float64 if dtype == np.float64 else torch.float32)
    e_mod = builder(em.nn).to(em.float64 if dtype == np.float64 else em.float32)
    state = {k: em.tensor(v.detach().numpy().copy()) for k, v in t_mod.state_dict().items()}
    e_mod.load_state_dict(state)  # strict: PyTorch's keys must load unchanged
    return e_mod, t_mod


def _convert(x, dtype, lib):
    if x is None:
        return None
    if isinstance(x, tuple):
        return tuple(_convert(v, dtype, lib) for v in x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f":
            x = x.astype(dtype)
            return em.tensor(x, requires_grad=True) if lib is em else torch.tensor(x, requires_grad=True)
        return em.tensor(x) if lib is em else torch.tensor(x)
    return x


def _leaves(x) -> list:
    """The tensors in a nested structure (None, flags and other non-tensors dropped)."""
    if x is None or isinstance(x, (bool, int, float)):
        return []
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def run_pair(builder, args: tuple, kwargs: dict | None = None, dtype=np.float64, train: bool = True,
             backward: bool = True, pair=None):
    """Forward both modules, compare every output, then backward a random projection of all outputs and
    compare the gradients of every float input and every parameter. Returns the (ember, torch) modules."""
    kwargs = kwargs or {}
    e_mod, t_mod = pair if pair is not None else build(builder, dtype)
    e_mod.train(train)
    t_mod.train(train)
    e_args = [_convert(a, dtype, em) for a in args]
    t_args = [_convert(a, dtype, torch) for a in args]
    e_kw = {k: _convert(v, dtype, em) for k, v in kwargs.items()}
    t_kw = {k: _convert(v, dtype, torch) for k, v in kwargs.items()}
    # the same tensor object passed twice (self-attention) must stay one object
    for conv, raw in ((e_args, args), (t_args, args)):
        for i, a in enumerate(raw):
            for j in range(i):
                if raw[j] is a:
                    conv[i] = conv[j]
    e_out, t_out = _leaves(e_mod(*e_args, **e_kw)), _leaves(t_mod(*t_args, **t_kw))
    assert len(e_out) == len(t_out), f"{len(e_out)} outputs, PyTorch gives {len(t_out)}"
    tol = TOL[dtype]
    for k, (a, b) in enumerate(zip(e_out, t_out)):
        assert tuple(a.shape) == tuple(b.shape), f"output {k}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert a.dtype.np == np.dtype(dtype), f"output {k}: dtype {a.dtype}"
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), err_msg=f"output {k}", **tol)
    if not backward:
        return e_mod, t_mod
    e_loss = t_loss = 0.0
    for a, b in zip(e_out, t_out):
        g = RNG.standard_normal(tuple(b.shape)).astype(dtype)
        e_loss = e_loss + (a * em.tensor(g)).sum()
        t_loss = t_loss + (b * torch.tensor(g)).sum()
    e_loss.backward()
    t_loss.backward()
    for k, (a, b) in enumerate(zip(_leaves(e_args) + _leaves(list(e_kw.values())),
                                   _leaves(t_args) + _leaves(list(t_kw.values())))):
        if b.grad is not None:
            assert a.grad is not None, f"input {k} got no gradient"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), err_msg=f"grad of input {k}", **tol)
    t_params = dict(t_mod.named_parameters())
    assert sorted(t_params) == sorted(name for name, _ in e_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        tp = t_params[name]
        if tp.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), f"{name}: unexpected gradient"
            continue
        assert p.grad is not None, f"{name}: no gradient"
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), err_msg=f"grad of {name}", **tol)
    return e_mod, t_mod


def assert_same_state_dict(builder) -> None:
    """Keys, order and shapes of the state dict equal PyTorch's."""
    torch.manual_seed(0)
    t_sd = builder(torch.nn).state_dict()
    e_sd = builder(em.nn).state_dict()
    assert list(e_sd) == list(t_sd)
    for k in t_sd:
        assert tuple(e_sd[k].shape) == tuple(t_sd[k].shape), k
