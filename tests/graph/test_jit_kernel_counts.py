"""A jitted step never runs more kernels than the same eager step, for every model in benchmarks/train_step.py.

Counting kernels (the profiler's events) instead of timing keeps the check exact on a noisy machine:
a pass, fusion or plan that adds kernels to a step shows up here as a failure.
"""

import os
import sys

import numpy as np
import pytest

import ember as em

pytest.importorskip("torch")  # benchmarks/train_step.py imports it
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "benchmarks"))
import train_step as bench  # noqa: E402


def _kernels(fn) -> int:
    with em.profiler.profile() as prof:
        fn()
    return sum(1 for e in prof.events if e.cat != "range")


def _small_batch(name):
    """The benchmark's data, cut to batch 2 so the test stays quick (the kernel count does not depend on it)."""
    x, y = bench.CASES[name][1](np.random.default_rng(0))
    return em.tensor(x[:2]), em.tensor(y[:2])


@pytest.mark.parametrize("name", list(bench.CASES))
def test_jit_training_step_runs_no_more_kernels_than_eager(name):
    build, _, kind, opt_name = bench.CASES[name]
    x, y = _small_batch(name)
    counts = {}
    for mode in ("eager", "jit"):
        em.manual_seed(0)
        model = build(em)
        step = bench._step_fn(em, model, bench._optimizer(em, model.parameters(), opt_name), kind)
        if mode == "jit":
            step = em.jit(step)
        step(x, y)
        step(x, y)  # optimizer state exists from the second call on: that is the steady state
        counts[mode] = _kernels(lambda: step(x, y))
    assert counts["jit"] <= counts["eager"], counts


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_jit_inference_runs_no_more_kernels_than_eager(name):
    build = {"resnet18": bench.resnet18, "mobilenet_v2": bench.mobilenet_v2}[name]
    em.manual_seed(0)
    model = build(em, num_classes=10)
    model.eval()
    x = em.tensor(np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32))
    jitted = em.jit(lambda t: model(t))
    with em.no_grad():
        jitted(x)
        counts = {"eager": _kernels(lambda: model(x)), "jit": _kernels(lambda: jitted(x))}
    assert counts["jit"] <= counts["eager"], counts


@pytest.mark.parametrize("name", ["mlp", "lenet5", "resnet20"])
def test_jit_sgd_step_copies_no_float_tensor_back(name):
    """Weights, momentum buffers and batch-norm statistics are computed straight into their tensors: the
    plan's buffers add no copy per step. The int64 batch counters too: their 0-d adds join the step's
    merged 0-d region, whose kernel writes into them.
    Runs in order: the parallel engine (tried by plans with independent branches) still copies back."""
    from ember.runtime.settings import get_parallel, set_parallel

    old = get_parallel()
    set_parallel(False)
    try:
        _check_no_copy_back(name)
    finally:
        set_parallel(old)


def _check_no_copy_back(name):
    build, _, kind, opt_name = bench.CASES[name]
    x, y = _small_batch(name)
    em.manual_seed(0)
    model = build(em)
    step = em.jit(bench._step_fn(em, model, bench._optimizer(em, model.parameters(), opt_name), kind))
    for _ in range(3):
        step(x, y)
    (entry,) = step.entries()
    assert entry.mutated and entry.copied_back == 0, (entry.copied_back, len(entry.mutated))
