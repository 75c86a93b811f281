"""A jitted function that reads gradients made before the call (a jitted optimizer step after an eager backward,
gradient accumulation over jitted micro-steps) reads them afresh at every call, and is traced again when which of
them exist changes; every run equals eager: parameters, gradients, optimizer state."""

import numpy as np
import pytest

import ember as em

F = em.nn.functional


def _model():
    em.manual_seed(0)
    return em.nn.Sequential(em.nn.Linear(4, 6), em.nn.Tanh(), em.nn.Linear(6, 3))


def _state(model, opt):
    out = [p.detach().numpy().copy() for p in model.parameters()]
    out += [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]
    for st in opt.state_dict()["state"].values():
        out += [v.numpy().copy() if isinstance(v, em.Tensor) else v for v in st.values()]
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


OPTIMIZERS = {
    "sgd_momentum": lambda ps: em.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: em.optim.Adam(ps, lr=0.01),
}


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_a_jitted_optimizer_step_after_an_eager_backward_equals_eager(opt_name):
    """zero_grad(set_to_none=True) and the next backward make new gradient tensors every iteration: the program
    must read those, not the ones it saw when it was traced. One parameter has no gradient on some steps."""
    def run(jitted):
        model = _model()
        opt = OPTIMIZERS[opt_name](model.parameters())
        step = em.jit(lambda: opt.step()) if jitted else opt.step
        history = []
        for i in range(7):
            opt.zero_grad()
            x = em.full((5, 4), 0.1 * (i + 1))
            out = model(x) if i % 3 != 2 else model[1](model[0](x)).sum(1, keepdim=True) * em.ones(1, 3)
            F.mse_loss(out, em.zeros(5, 3)).backward()  # every third step the last layer gets no gradient
            opt.param_groups[0]["lr"] *= 0.9
            step()
            history.append(_state(model, opt))
        return history, getattr(step, "trace_count", 0)

    eager, _ = run(False)
    jitted, traces = run(True)
    for a, b in zip(eager, jitted):
        _assert_same(a, b)
    assert traces <= 4  # the first step (no state yet), then one program per set of parameters with a gradient


def test_gradient_accumulation_over_jitted_micro_steps_equals_eager():
    """A jitted forward+backward called several times between optimizer steps adds into the gradients an earlier
    call made; the first call after zero_grad sets them. Two programs, used in turn."""
    def run(jitted):
        model = _model()
        opt = em.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)

        def micro(x, y):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        f = em.jit(micro) if jitted else micro
        history = []
        for i in range(12):
            x = em.full((3, 4), 0.2 * ((i % 5) - 2))
            f(x, em.tensor([i % 3, (i + 1) % 3, 2]))
            if i % 3 == 2:
                opt.step()
                history.append(_state(model, opt))
                opt.zero_grad()
        return history, getattr(f, "trace_count", 0)

    eager, _ = run(False)
    jitted, traces = run(True)
    for a, b in zip(eager, jitted):
        _assert_same(a, b)
    assert traces == 2


def test_a_gradient_assigned_by_hand_between_calls_is_read():
    w = em.nn.Parameter(em.ones(3))
    opt = em.optim.SGD([w], lr=1.0)
    step = em.jit(lambda: opt.step())
    for value in (1.0, 2.0, 0.5):
        w.grad = em.full((3,), value)
        before = w.detach().numpy().copy()
        step()
        np.testing.assert_array_equal(w.detach().numpy(), before - value)
    w.grad = None  # no gradient: SGD skips the parameter, and so must the program
    before = w.detach().numpy().copy()
    step()
    np.testing.assert_array_equal(w.detach().numpy(), before)


def test_another_threads_gradient_reads_during_a_trace_are_its_own():
    """What a trace records about .grad reads is per thread: an eager thread reading a gradient meanwhile gets the
    gradient itself, and adds nothing to the program's guards."""
    import threading

    other = em.nn.Parameter(em.ones(2))
    other.grad = em.full((2,), 3.0)
    seen = []

    def traced(x):
        t = threading.Thread(target=lambda: seen.append(other.grad))
        t.start()
        t.join()
        return x * 2

    f = em.jit(traced)
    f(em.ones(2))
    assert seen[0] is other.grad
    other.grad = None  # not read by the program: no new trace
    f(em.ones(2))
    assert f.trace_count == 1
