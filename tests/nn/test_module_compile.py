"""`Module.compile()` (torch.nn.Module.compile): the module compiles its calls in place, keeps its state-dict keys,
trains through it with the learning rate changed between steps as PyTorch's does, and a deep copy runs its own
weights."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")


def _pair():
    em.manual_seed(0)
    ours = em.nn.Sequential(em.nn.Linear(4, 8), em.nn.ReLU(), em.nn.Linear(8, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def test_compile_in_place_keeps_the_module_and_runs_compiled():
    ours, theirs = _pair()
    keys = list(ours.state_dict())
    # (PyTorch's theirs.compile() also returns None; it is not called here: importing torch._dynamo turns off
    # torch.distributions' argument validation for the rest of the process, which other tests compare against)
    assert ours.compile() is None
    assert isinstance(ours, em.nn.Sequential) and type(ours).__name__ == "Sequential"
    assert list(ours.state_dict()) == keys == list(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    with em.no_grad():
        got = ours(em.tensor(x)).numpy()
    compiled = ours.__dict__["_compiled_for"][1]
    assert compiled.trace_count == 1  # the call ran through ember.jit
    np.testing.assert_allclose(got, theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_training_through_a_compiled_module_matches_torch():
    ours, theirs = _pair()
    ours.compile()
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    opt_e = em.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for step, lr in enumerate((0.1, 0.1, 0.02, 0.05)):  # the learning rate changed between steps
        for ge, gt in zip(opt_e.param_groups, opt_t.param_groups):
            ge["lr"] = gt["lr"] = lr
        xe, xt = em.tensor(x[: 6 - step]), torch.tensor(x[: 6 - step])  # and the batch's size
        le, lt = ours(xe).pow(2).mean(), theirs(xt).pow(2).mean()
        opt_e.zero_grad()
        opt_t.zero_grad()
        le.backward()
        lt.backward()
        opt_e.step()
        opt_t.step()
        np.testing.assert_allclose(float(le), lt.item(), rtol=1e-5)
    for (name, pe), pt in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_deep_copy_runs_its_own_weights_and_settings_are_checked():
    ours, _ = _pair()
    ours.compile()
    x = em.randn(3, 4)
    with em.no_grad():
        before = ours(x).numpy()
        twin = copy.deepcopy(ours)
        twin[0].weight.add_(1.0)
        assert not np.allclose(twin(x).numpy(), before)
        np.testing.assert_array_equal(ours(x).numpy(), before)
    ours.compile(backend="eager")  # compiled again with other settings: still one subclass deep
    assert type(ours).__mro__[1] is em.nn.Sequential
    with pytest.raises(ValueError, match="compile: unknown backend 'nope'"):
        ours.compile(backend="nope")
    with pytest.raises(TypeError, match="keyword arguments only"):
        ours.compile(True)
