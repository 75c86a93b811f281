"""The compiled one-pass SGD-momentum and Adam updates equal the tensor-op updates bit for bit, and bump versions."""

import numpy as np
import pytest

import ember as em
from ember.graph import codegen
from ember.optim import fused

pytest.importorskip("numba")


def _train(backend, dtype, monkeypatch, hook: str, model, make_opt, state_keys, vary):
    """Six steps of `model` under `make_opt` on one fusion backend, calling `vary(group)` between steps as a
    scheduler would; returns (parameters and optimizer state, whether the compiled update `hook` ran)."""
    calls = []
    real = getattr(fused, hook.rsplit(".", 1)[1])

    def counted(*args, **kw):
        ran = real(*args, **kw)
        if callable(ran):  # a group's pass (sgd_momentum_pass): count what its updates did
            def update(*a):
                calls.append(ran(*a))
                return calls[-1]

            return update
        calls.append(ran)
        return ran

    monkeypatch.setattr(hook, counted)
    model = model.to(dtype)
    opt = make_opt(model.parameters())
    rng = np.random.default_rng(0)
    width = model[0].in_features
    for _ in range(6):
        x = em.tensor(rng.standard_normal((16, width))).to(dtype)
        y = em.tensor(rng.integers(0, 10, 16))
        opt.zero_grad()
        em.nn.functional.cross_entropy(model(x), y).backward()  # the gradients by the same kernels in both runs
        codegen.set_backend(backend)  # only the update is compiled or not
        try:
            opt.step()
        finally:
            codegen.set_backend(None)
        vary(opt.param_groups[0])
    state = [p.detach().numpy().copy() for p in model.parameters()]
    state += [opt.state[p][k].numpy().copy() for p in model.parameters() for k in state_keys]
    return state, any(calls)


def _vary_sgd(group):
    group["lr"] *= 0.7  # the options change between steps, as OneCycleLR changes lr and momentum
    group["momentum"] = 0.95 - group["momentum"] / 10


def _train_sgd(backend, dtype, monkeypatch, **options):
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(300, 200), em.nn.ReLU(), em.nn.Linear(200, 10))
    return _train(backend, dtype, monkeypatch, "ember.optim.sgd.sgd_momentum_pass", model,
                  lambda ps: em.optim.SGD(ps, lr=0.05, momentum=0.9, **options), ("momentum_buffer",), _vary_sgd)


@pytest.mark.parametrize("dtype", [em.float32, em.float64])
@pytest.mark.parametrize("options", [{}, {"nesterov": True}, {"weight_decay": 1e-3}, {"dampening": 0.1},
                                     {"maximize": True, "weight_decay": 1e-2}])
def test_fused_sgd_equals_the_tensor_ops(dtype, options, monkeypatch):
    want, fused_ran = _train_sgd("numpy", dtype, monkeypatch, **options)
    assert not fused_ran
    got, fused_ran = _train_sgd(None, dtype, monkeypatch, **options)
    assert fused_ran
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _sgd_step(p, g, buf, **options):
    """One compiled SGD-with-momentum update, as sgd() makes it (False where it cannot run)."""
    update = fused.sgd_momentum_pass(**{"momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
                                        "maximize": False, **options})
    return update is not None and update(p, g, buf)


def test_fused_sgd_bumps_versions_and_declines_what_it_cannot_do():
    p = em.zeros(200, 100)
    g, buf = em.ones(200, 100), em.ones(200, 100)
    before = (p._version[0], buf._version[0])
    assert _sgd_step(p, g, buf, lr=0.1)
    assert (p._version[0], buf._version[0]) == (before[0] + 1, before[1] + 1)
    np.testing.assert_allclose(p.numpy(), -0.1 * (0.9 + 1.0), rtol=1e-6)
    # a tensor learning rate, another dtype, or a strided gradient: the tensor-op path runs instead
    assert fused.sgd_momentum_pass(lr=em.tensor(0.1), momentum=0.9, dampening=0.0, weight_decay=0.0,
                                   nesterov=False, maximize=False) is None
    assert not _sgd_step(p, g.double(), buf, lr=0.1)
    assert not _sgd_step(p, em.ones(100, 200).t(), buf, lr=0.1)
    # one pass for parameters of two dtypes: each dtype's loop and options in that dtype
    update = fused.sgd_momentum_pass(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False,
                                     maximize=False)
    q, h, qbuf = em.zeros(3, dtype=em.float64), em.ones(3, dtype=em.float64), em.ones(3, dtype=em.float64)
    assert update(q, h, qbuf) and update(p, g, buf)
    np.testing.assert_array_equal(q.numpy(), np.full(3, -0.1 * (0.9 + 1.0)))
    assert q.numpy().dtype == np.float64


def _vary_adam(group):
    group["lr"] *= 0.8  # OneCycleLR changes lr and beta1 between steps
    group["betas"] = (0.95 - group["betas"][0] / 10, group["betas"][1])


def _train_adam(backend, dtype, monkeypatch, decoupled, **options):
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(30, 20), em.nn.Tanh(), em.nn.Linear(20, 10))
    cls = em.optim.AdamW if decoupled else em.optim.Adam
    return _train(backend, dtype, monkeypatch, "ember.optim.adam.adam_step", model,
                  lambda ps: cls(ps, lr=0.01, **options), ("exp_avg", "exp_avg_sq", "step"), _vary_adam)


@pytest.mark.parametrize("dtype", [em.float32, em.float64])
@pytest.mark.parametrize("decoupled,options", [
    (False, {}), (False, {"weight_decay": 1e-2}), (False, {"maximize": True, "betas": (0.3, 0.9)}),
    (True, {}), (True, {"weight_decay": 0.1, "maximize": True}), (False, {"betas": (0.6, 0.99), "eps": 1e-3}),
])
def test_fused_adam_equals_the_tensor_ops(dtype, decoupled, options, monkeypatch):
    want, fused_ran = _train_adam("numpy", dtype, monkeypatch, decoupled, **options)
    assert not fused_ran
    got, fused_ran = _train_adam(None, dtype, monkeypatch, decoupled, **options)
    assert fused_ran
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name,make_opt,fused_params", [
    ("fused_adam", lambda ps: em.optim.Adam(ps, lr=1e-2), 4),  # every parameter, small biases too
    ("fused_sgd_momentum", lambda ps: em.optim.SGD(ps, lr=0.05, momentum=0.9), 4),
])
def test_the_profiler_sees_the_fused_pass_that_runs_without_it(name, make_opt, fused_params):
    """Under em.profiler the optimizer still takes its one compiled pass per parameter, recorded as one event,
    so a profile shows the update that runs without it (and gives the same values)."""
    results = []
    for profiling in (False, True):
        em.manual_seed(0)
        model = em.nn.Sequential(em.nn.Linear(300, 200), em.nn.ReLU(), em.nn.Linear(200, 10))
        opt = make_opt(model.parameters())
        x, y = em.ones(16, 300), em.zeros(16, dtype=em.int64)
        for _ in range(3):
            opt.zero_grad()
            em.nn.functional.cross_entropy(model(x), y).backward()
            if profiling:
                with em.profiler.profile() as prof:
                    opt.step()
            else:
                opt.step()
        results.append([p.detach().numpy().copy() for p in model.parameters()])
    names = [e.name for e in prof.events]
    assert names.count(name) == fused_params and "lerp" not in names  # one event per fused parameter
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
