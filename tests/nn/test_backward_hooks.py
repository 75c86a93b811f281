"""Modules' full backward hooks against PyTorch's: what the hooks see (grad_input, grad_output, None where PyTorch
gives None), what replacing them does to the gradients, training with hooks while data and learning rate change,
Grad-CAM's pattern, nested outputs, removal, and the refused deprecated form."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import copy_weights

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 1, 6, 6)).astype(np.float32)


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(1, 3, 3), lib.nn.ReLU(), lib.nn.Flatten(), lib.nn.Linear(48, 2))


def _pair():
    theirs, ours = _net(torch), _net(em)
    copy_weights(ours, theirs)
    return theirs, ours


def _numpy(grads) -> list:
    return [None if g is None else g.detach().numpy().copy() for g in grads]


def _same(ours, theirs, atol: float = 1e-5) -> None:
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert (o is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(o, t, atol=atol)


@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_hooks_see_and_replace_gradients_as_torch(input_requires_grad) -> None:
    results = {}
    for lib, net in zip((torch, em), _pair()):
        log = []
        net[0].register_full_backward_hook(lambda m, gi, go: log.append((_numpy(gi), _numpy(go))))
        net[3].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
        net[3].register_full_backward_hook(lambda m, gi, go: log.append((_numpy(gi), _numpy(go))) or (gi[0] * 0.5,))
        x = lib.tensor(X, requires_grad=input_requires_grad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Full backward hook is firing ... no inputs require gradients"
            net(x).sum().backward()
        results[lib] = (log, net[0].weight.grad.numpy(), None if x.grad is None else x.grad.numpy())
    (their_log, their_w, their_x), (our_log, our_w, our_x) = results[torch], results[em]
    assert len(our_log) == len(their_log) == 2
    for (ogi, ogo), (tgi, tgo) in zip(our_log, their_log):
        _same(ogi, tgi)
        _same(ogo, tgo)
    np.testing.assert_allclose(our_w, their_w, atol=1e-5)
    assert (our_x is None) == (their_x is None)
    if their_x is not None:
        np.testing.assert_allclose(our_x, their_x, atol=1e-5)


def test_training_with_a_gradient_clipping_hook_matches_torch() -> None:
    weights = {}
    for lib, net in zip((torch, em), _pair()):
        net[3].register_full_backward_hook(lambda m, gi, go: (gi[0].clamp(-0.01, 0.01),))
        opt = lib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        rng = np.random.default_rng(1)
        for step in range(4):
            for group in opt.param_groups:
                group["lr"] = 0.1 / (step + 1)
            opt.zero_grad()
            x = lib.tensor(rng.standard_normal((3, 1, 6, 6)).astype(np.float32))
            net(x).square().mean().backward()
            opt.step()
        weights[lib] = [p.detach().numpy() for p in net.parameters()]
    for ours, theirs in zip(weights[em], weights[torch]):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_grad_cam_pattern_matches_torch() -> None:
    cams = {}
    for lib, net in zip((torch, em), _pair()):
        saved = {}
        net[0].register_forward_hook(lambda m, args, out: saved.__setitem__("act", out))
        net[0].register_full_backward_hook(lambda m, gi, go: saved.__setitem__("grad", go[0]))
        x = lib.tensor(X, requires_grad=True)
        net(x)[:, 1].sum().backward()
        weights = saved["grad"].mean(dim=(2, 3), keepdim=True)
        cams[lib] = (weights * saved["act"]).sum(1).relu().detach().numpy()
    np.testing.assert_allclose(cams[em], cams[torch], atol=1e-5)


def test_nested_outputs_and_removal_as_torch() -> None:
    seen = {}
    for lib in (torch, em):
        class Two(lib.nn.Module):
            def forward(self, x):
                return x * 2, (x * 3, x * 4)

        module, log = Two(), []
        handle = module.register_full_backward_hook(lambda m, gi, go: log.append([None if g is None else
                                                                                  tuple(g.shape) for g in go]))
        x = lib.ones(2, requires_grad=True)
        a, (b, _c) = module(x)
        (a.sum() + b.sum()).backward()
        handle.remove()
        a, _ = module(x)
        a.sum().backward()
        seen[lib] = (log, x.grad.numpy())
    assert seen[em][0] == seen[torch][0] == [[(2,), None]]
    np.testing.assert_array_equal(seen[em][1], seen[torch][1])


def test_the_deprecated_non_full_hook_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        em.nn.Linear(2, 2).register_backward_hook(lambda m, gi, go: None)
    with pytest.raises(TypeError, match="backward hook must be callable"):
        em.nn.Linear(2, 2).register_full_backward_hook(3)
