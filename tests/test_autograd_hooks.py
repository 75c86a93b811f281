"""Tensor.register_post_accumulate_grad_hook against PyTorch: when hooks run, what they see, errors."""

import numpy as np
import pytest
import torch

import ember as em


def _two_layers(lib, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in [(5, 4), (4, 3), (3, 2)]]
    x, w1, w2 = (lib.tensor(a, dtype=lib.float64) for a in arrays)
    w1.requires_grad_(True)
    w2.requires_grad_(True)
    return x, w1, w2


def _events(lib):
    """Run backward through x @ w1 @ w2 (w1 used twice) and record each hook call with what it saw."""
    x, w1, w2 = _two_layers(lib)
    events = []

    def hook(name, other):
        def fn(p):
            events.append((name, p.grad.detach().numpy().copy(), other.grad is None))
        return fn

    w1.register_post_accumulate_grad_hook(hook("w1", w2))
    w2.register_post_accumulate_grad_hook(hook("w2", w1))
    loss = ((x @ w1).tanh() @ w2).sum() + (w1 * w1).sum()
    loss.backward()
    return events, w1, w2


def test_hooks_run_once_per_leaf_after_its_gradient_is_complete_in_torchs_order():
    ours, w1, w2 = _events(em)
    theirs, tw1, tw2 = _events(torch)
    assert [e[0] for e in ours] == [e[0] for e in theirs] == ["w2", "w1"]
    for (_, g, none), (_, tg, tnone) in zip(ours, theirs):
        np.testing.assert_allclose(g, tg, rtol=1e-12)  # the whole gradient (both uses of w1) is in .grad
        assert none == tnone
    # w2's hook ran before w1's gradient existed: work can start on it while backward goes on
    assert ours[0][2] is True


def test_hook_sees_accumulated_grad_and_may_update_the_leaf():
    for lib in (em, torch):
        v = lib.tensor([0.0, 0.0, 0.0], requires_grad=True)
        v.grad = lib.tensor([1.0, 1.0, 1.0])
        seen = []

        def hook(p):
            seen.append(p.grad.tolist())
            with lib.no_grad():
                p.add_(p.grad, alpha=-0.5)

        h = v.register_post_accumulate_grad_hook(hook)
        v.backward(lib.tensor([1.0, 2.0, 3.0]))
        assert seen == [[2.0, 3.0, 4.0]]
        assert v.detach().tolist() == [-1.0, -1.5, -2.0]
        h.remove()
        v.backward(lib.tensor([1.0, 2.0, 3.0]))
        assert len(seen) == 1


def test_hooks_run_in_registration_order_and_not_for_autograd_grad():
    for lib in (em, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        calls = []
        w.register_post_accumulate_grad_hook(lambda p: calls.append("a"))
        w.register_post_accumulate_grad_hook(lambda p: calls.append("b"))
        (w * w).sum().backward()
        assert calls == ["a", "b"]
        lib.autograd.grad((w * w).sum(), [w])
        assert calls == ["a", "b"]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_hook_runs_without_grad_recording_unless_create_graph():
    for lib in (em, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        modes = []
        w.register_post_accumulate_grad_hook(lambda p: modes.append(lib.is_grad_enabled()))
        (w * w).sum().backward()
        (w * w).sum().backward(create_graph=True)
        assert modes == [False, True]


def test_leaf_that_is_the_root_gets_its_hook_called():
    for lib in (em, torch):
        w = lib.tensor(2.0, requires_grad=True)
        calls = []
        w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.item()))
        w.backward()
        assert calls == [1.0]


@pytest.mark.parametrize("case", ["no_grad", "non_leaf"])
def test_registering_on_the_wrong_tensor_raises_torchs_error(case):
    for lib in (em, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=case == "non_leaf")
        t = w * 2 if case == "non_leaf" else w
        with pytest.raises(RuntimeError) as err:
            t.register_post_accumulate_grad_hook(lambda p: None)
        msg = str(err.value)
        assert ("doesn't require gradient" in msg) if case == "no_grad" else ("non-leaf" in msg)


def test_a_hook_that_returns_a_value_is_an_error():
    for lib in (em, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        w.register_post_accumulate_grad_hook(lambda p: p.grad * 2)
        with pytest.raises(RuntimeError, match="should return None"):
            (w * w).sum().backward()
