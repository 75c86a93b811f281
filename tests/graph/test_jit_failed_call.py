"""A jitted call that raises leaves the state eager code leaves: what the function did before the error
(a batch norm's counter, in-place writes, gradients, an optimizer's step and new state, writes into tensor
arguments) has happened, and the next call continues from there as it would eagerly."""

import numpy as np
import pytest
import torch

import ember as em

F = em.nn.functional


def _batch_norm_run(kind: str):
    """A cumulative-average BatchNorm1d (momentum=None) trained on batches of 4 with a batch of 1 in between, which
    fails after the counter was incremented: the state and the error after every call."""
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 1, 4, 1, 1, 4)]
    if kind == "torch":
        bn = torch.nn.BatchNorm1d(3, momentum=None)
        call, wrap = bn, torch.from_numpy
    else:
        bn = em.nn.BatchNorm1d(3, momentum=None)
        call, wrap = (em.jit(lambda x: bn(x)) if kind == "jit" else bn), em.tensor
    history = []
    for b in batches:
        error = None
        try:
            call(wrap(b))
        except ValueError as e:
            error = str(e).split(", got")[0]
        history.append((error, int(bn.num_batches_tracked), bn.running_mean.detach().numpy().copy(),
                        bn.running_var.detach().numpy().copy()))
    return history


def test_batch_norm_after_a_failed_batch_of_one_under_jit_equals_eager_and_torch():
    """PyTorch and eager count the batch before refusing a batch of one; with momentum=None the running mean then
    averages over that count: jit must count it too."""
    want, eager, jitted = _batch_norm_run("torch"), _batch_norm_run("eager"), _batch_norm_run("jit")
    assert [h[:2] for h in want] == [h[:2] for h in eager] == [h[:2] for h in jitted]
    assert [h[1] for h in jitted] == [1, 2, 3, 4, 5, 6]
    for (_, _, mean_t, var_t), (_, _, mean_e, var_e), (_, _, mean_j, var_j) in zip(want, eager, jitted):
        np.testing.assert_allclose(mean_e, mean_t, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(var_e, var_t, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(mean_j, mean_e, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(var_j, var_e, rtol=1e-6, atol=1e-7)


def _training_run(jitted: bool):
    """A training step that raises after backward and the optimizer step when a flag argument says so: parameters,
    gradients, optimizer state, a written tensor argument and a counter after every call."""
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(3, 4), em.nn.Tanh(), em.nn.Linear(4, 2))
    opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # its first momentum buffer is made in the step
    calls = em.zeros((), dtype=em.int64)

    def step(x, y, seen, fail):
        calls.add_(1)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        seen.add_(loss.detach())
        if fail:
            raise ValueError("step: this batch is rejected after the update")
        return loss

    f = em.jit(step) if jitted else step
    rng = np.random.default_rng(1)
    seen = em.zeros(())
    history = []
    for fail in (True, False, True, True, False, False):
        x = em.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        y = em.tensor(rng.integers(0, 2, 5))
        try:
            loss = f(x, y, seen, fail).item()
        except ValueError as e:
            loss = str(e)
        state = [opt.state[p]["momentum_buffer"].numpy().copy() if "momentum_buffer" in opt.state[p] else None
                 for p in model.parameters()]
        history.append((loss, int(calls), seen.item(), [p.detach().numpy().copy() for p in model.parameters()],
                        [p.grad.numpy().copy() for p in model.parameters()], state))
    return history


def test_a_training_step_that_raises_after_the_update_leaves_eager_state():
    """Gradients, parameters, momentum buffers (the first made inside the step), a captured counter and a tensor
    argument written in place are all as eager code leaves them, on the failing calls and on the calls after."""
    for want, got in zip(_training_run(False), _training_run(True)):
        assert got[:3] == want[:3]
        for a, b in zip(got[3] + got[4], want[3] + want[4]):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(got[5], want[5]):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)


def test_a_failed_call_runs_only_what_came_before_the_error():
    """Writes after the error do not happen, and the error is the function's own, with its traceback."""
    before, after = em.zeros(2), em.zeros(2)

    @em.jit
    def f(x):
        before.add_(x)
        if x.shape[0] == 2:
            raise IndexError("f: rejected")
        after.add_(x)
        return x

    with pytest.raises(IndexError, match="f: rejected") as info:
        f(em.ones(2))
    assert info.traceback[-1].name == "f"
    assert before.tolist() == [1, 1] and after.tolist() == [0, 0]
    with pytest.raises(IndexError, match="f: rejected"):
        f(em.ones(2))  # a failed call is not cached: it runs (and fails) again
    assert before.tolist() == [2, 2] and after.tolist() == [0, 0]
