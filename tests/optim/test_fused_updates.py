"""The compiled one-pass SGD-momentum and Adam updates equal the tensor-op updates bit for bit, and bump versions."""

import itertools

import numpy as np
import pytest

import ember as em
from ember.graph import codegen
from ember.kernels import parallel
from ember.optim import fused
from ember.optim.adam import adam_update
from ember.optim.sgd import sgd_update

from .compiled_passes import record_compiled_passes

pytest.importorskip("numba")


def _train(backend, dtype, monkeypatch, model, make_opt, vary):
    """Six steps of `model` under `make_opt` on one fusion backend, calling `vary(group, step)` between steps as a
    scheduler would, and editing the parameters in place; returns (parameters and optimizer state, whether a
    compiled pass ran)."""
    calls = record_compiled_passes(monkeypatch)
    model = model.to(dtype)
    opt = make_opt(model.parameters())
    rng = np.random.default_rng(0)
    width = model[0].in_features
    for step in range(6):
        x = em.tensor(rng.standard_normal((16, width))).to(dtype)
        y = em.tensor(rng.integers(0, 10, 16))
        opt.zero_grad()
        em.nn.functional.cross_entropy(model(x), y).backward()  # the gradients by the same kernels in both runs
        codegen.set_backend(backend)  # only the update is compiled or not
        try:
            opt.step()
        finally:
            codegen.set_backend(None)
        vary(opt.param_groups[0], step)
        if step == 2:
            with em.no_grad():  # an in-place edit between steps, as a weight clipping or re-initialisation makes
                model[0].weight.mul_(0.5)
    state = [p.detach().numpy().copy() for p in model.parameters()]
    state += [value.numpy().copy() for p in model.parameters() for value in opt.state[p].values()]
    return state, bool(calls)


def _vary_sgd(group, step):
    group["lr"] *= 0.7  # the options change between steps, as OneCycleLR changes lr and momentum
    group["momentum"] = 0.95 - group["momentum"] / 10
    if step == 3:  # weight decay switched on (or off) mid-run
        group["weight_decay"] = 1e-2 if group["weight_decay"] == 0 else 0


def _train_sgd(backend, dtype, monkeypatch, **options):
    em.manual_seed(0)
    # the first weight's 80,000 values: past FUSED's split_min, so its pass runs in chunks over the threads
    model = em.nn.Sequential(em.nn.Linear(400, 200), em.nn.ReLU(), em.nn.Linear(200, 10))
    return _train(backend, dtype, monkeypatch, model,
                  lambda ps: em.optim.SGD(ps, lr=0.05, momentum=0.9, **options), _vary_sgd)


@pytest.mark.parametrize("dtype", [em.float32, em.float64])
@pytest.mark.parametrize("options", [{}, {"nesterov": True}, {"weight_decay": 1e-3}, {"dampening": 0.1},
                                     {"maximize": True, "weight_decay": 1e-2}])
@pytest.mark.parametrize("threads", [1, 2])
def test_fused_sgd_equals_the_tensor_ops(dtype, options, threads, monkeypatch, set_threads):
    set_threads(threads)
    want, fused_ran = _train_sgd("numpy", dtype, monkeypatch, **options)
    assert not fused_ran
    splits = []
    run_kernel = parallel.run_kernel
    monkeypatch.setattr(parallel, "run_kernel", lambda fn, parts, *a: (splits.append(parts), run_kernel(fn, parts, *a)))
    got, fused_ran = _train_sgd(None, dtype, monkeypatch, **options)
    assert fused_ran
    assert splits and all(parts == parallel.split(80_000, threads) for parts in splits)  # the first weight's
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _sgd_momentum_update():
    """A group's SGD-with-momentum update, as sgd() makes it for the steps after the first."""
    return fused.FusedUpdate("SGD", "fused_sgd_momentum", sgd_update, None, first=False, decay=False, nesterov=False,
                             maximize=False)


def _compiled_sgd_step(monkeypatch, p, g, buf, lr=0.1, update=None) -> bool:
    """One SGD-with-momentum update of p and buf (by `update`, else a new group's); whether the compiled pass
    made it."""
    with monkeypatch.context() as patch:
        calls = record_compiled_passes(patch)
        (update or _sgd_momentum_update())(p, g, buf, lr=lr, momentum=0.9, dampening=0, weight_decay=0)
    return bool(calls)


def test_fused_sgd_bumps_versions_and_declines_what_it_cannot_do(monkeypatch):
    p = em.zeros(200, 100)
    g, buf = em.ones(200, 100), em.ones(200, 100)
    before = (p._version[0], g._version[0], buf._version[0])
    assert _compiled_sgd_step(monkeypatch, p, g, buf)
    assert (p._version[0], g._version[0], buf._version[0]) == (before[0] + 1, before[1], before[2] + 1)
    np.testing.assert_allclose(p.numpy(), -0.1 * (0.9 + 1.0), rtol=1e-6)
    # a tensor learning rate, another dtype, or a strided gradient: the tensor ops run instead, with the same rule
    for args, lr in [((p, g, buf), em.tensor(0.1)), ((p, g.double(), buf), 0.1), ((p, em.ones(100, 200).t(), buf), 0.1)]:
        want = [t.numpy().copy() for t in (p, buf)]
        want[1] = want[1] * np.float32(0.9) + args[1].numpy().astype(np.float32)
        want[0] = want[0] + want[1] * np.float32(-0.1)
        assert not _compiled_sgd_step(monkeypatch, *args, lr=lr)
        np.testing.assert_allclose(p.numpy(), want[0], rtol=1e-6)
        np.testing.assert_allclose(buf.numpy(), want[1], rtol=1e-6)
    # one group's update over parameters of two dtypes: each dtype's loop, the options in that dtype; an integer
    # learning rate is a number like any other
    update = _sgd_momentum_update()
    q, h, qbuf = em.zeros(3, dtype=em.float64), em.ones(3, dtype=em.float64), em.ones(3, dtype=em.float64)
    assert _compiled_sgd_step(monkeypatch, q, h, qbuf, update=update)
    assert _compiled_sgd_step(monkeypatch, p, g, buf, update=update)
    np.testing.assert_array_equal(q.numpy(), np.full(3, -0.1 * (0.9 + 1.0)))
    assert q.numpy().dtype == np.float64
    assert _compiled_sgd_step(monkeypatch, q, h, qbuf, lr=1, update=update)
    np.testing.assert_array_equal(q.numpy(), np.full(3, -0.1 * (0.9 + 1.0) - (0.9 * 1.9 + 1.0)))


def _vary_adam(group, step):
    group["lr"] *= 0.8  # OneCycleLR changes lr and beta1 between steps
    group["betas"] = (0.95 - group["betas"][0] / 10, group["betas"][1])
    if step == 3:  # weight decay switched on (or off) mid-run
        group["weight_decay"] = 1e-2 if group["weight_decay"] == 0 else 0


def _train_adam(backend, dtype, monkeypatch, decoupled, **options):
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(340, 200), em.nn.Tanh(), em.nn.Linear(200, 10))  # 68,000 values: split
    cls = em.optim.AdamW if decoupled else em.optim.Adam
    return _train(backend, dtype, monkeypatch, model,
                  lambda ps: cls(ps, lr=0.01, **options), _vary_adam)


@pytest.mark.parametrize("dtype", [em.float32, em.float64])
@pytest.mark.parametrize("decoupled,options", [
    (False, {}), (False, {"weight_decay": 1e-2}), (False, {"maximize": True, "betas": (0.3, 0.9)}),
    (True, {}), (True, {"weight_decay": 0.1, "maximize": True}), (False, {"betas": (0.6, 0.99), "eps": 1e-3}),
    (False, {"amsgrad": True}), (True, {"amsgrad": True, "maximize": True}),
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


def test_every_structure_of_the_rules_becomes_one_region():
    """Every combination of the rules' boolean options and state traces to one fused region that reads each tensor
    and option it needs and writes the tensors the rule updates (what FusedUpdate compiles)."""
    adam_values = ("lr", "weight_decay", "beta1", "beta2", "eps", "step_size", "bias_correction2_sqrt")
    for decay, decoupled, maximize, amsgrad in itertools.product([False, True], repeat=4):
        structure = dict(decay=decay, decoupled=decoupled, maximize=maximize)
        region, tensors, values, written = fused._trace(adam_update, structure, np.float32,
                                                        [False] * 4 + [not amsgrad], adam_values)
        assert tensors == [0, 1, 2, 3] + [4] * amsgrad and written == [0, 2, 3] + [4] * amsgrad
        assert ("weight_decay" in values) == decay and ("lr" in values) == (decay and decoupled)
        assert len(region.outputs) == len(written)
    sgd_values = ("lr", "momentum", "dampening", "weight_decay")
    for decay, nesterov, maximize, momentum in itertools.product([False, True], repeat=4):
        structure = dict(decay=decay, nesterov=nesterov, maximize=maximize, first=False)
        region, tensors, values, written = fused._trace(sgd_update, structure, np.float32,
                                                        [False, False, not momentum], sgd_values)
        assert written == ([0, 2] if momentum else [0]) and ("dampening" in values) == momentum
        assert len(region.outputs) == len(written)
