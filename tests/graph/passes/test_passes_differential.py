"""Differential tests: random graphs give the same values with all passes on and with passes off."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from passes_util import assert_same, run, run_optimized, sym

import ember as em
from ember.errors import ShapeError
from ember.graph import Graph, codegen
from ember.graph.codegen import NumbaRenderer

UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(), "tanh": lambda x: x.tanh(), "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(), "sin": lambda x: x.sin(), "exp": lambda x: x.clamp(-3, 3).exp(),
    "log": lambda x: (x.abs() + 1).log(), "sqrt": lambda x: x.abs().sqrt(), "square": lambda x: x.tanh().square(),
    "mul1": lambda x: x * 1, "add0": lambda x: 0 + x, "negneg": lambda x: x.neg().neg(), "cast": lambda x: x.double().float(),
    "scale": lambda x: x * 0.5 - 0.25, "rsub": lambda x: 2 - x, "pow2": lambda x: x ** 2,
    "flat": lambda x: x.reshape(-1).reshape(x.shape), "t": lambda x: x.permute(*reversed(range(x.ndim))),
    "sum": lambda x: x.sum(0) if x.ndim else x, "mean": lambda x: x.mean(-1, keepdim=True) if x.ndim else x,
    "sumall": lambda x: x.sum(), "gram": lambda x: x @ x.permute(1, 0) if x.ndim == 2 else x,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1), "max": lambda a, b: em.maximum(a, b), "min": lambda a, b: em.minimum(a, b),
    "where": lambda a, b: em.where(a > b, a, b * 2),
}


@st.composite
def programs(draw):
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    shapes = draw(st.lists(st.sampled_from([(rows, cols), (cols,), (rows, 1), (1, cols), ()]), min_size=1, max_size=3))
    step = st.tuples(st.integers(0, 9), st.integers(0, 100), st.integers(0, 3), st.integers(0, 3))
    steps = draw(st.lists(step, min_size=1, max_size=12))
    n_out = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    return shapes, steps, n_out, seed


def _build(program, dtype):
    shapes, steps, n_out, seed = program
    g = Graph()
    pool = [sym(g, s, dtype, name=f"in{i}") for i, s in enumerate(shapes)]
    inputs = list(pool)
    made = []  # (fn, operand tensors) to repeat for CSE
    unary, binary = sorted(UNARY), sorted(BINARY)
    for kind, which, i, j in steps:
        # operands counted from the newest value, so programs grow chains (what fusion works on)
        a, b = pool[-1 - i % len(pool)], pool[-1 - j % len(pool)]
        if kind == 9:  # repeat an earlier computation (for CSE)
            if not made:
                continue
            fn, args = made[which % len(made)]
        elif kind < 5:
            fn, args = UNARY[unary[which % len(unary)]], (a,)
        else:
            fn, args = BINARY[binary[which % len(binary)]], (a, b)
        try:
            pool.append(fn(*args))
        except (ShapeError, IndexError, ValueError):
            continue
        made.append((fn, args))
    outs = [t._data for t in pool[-n_out:]]
    rng = np.random.default_rng(seed)
    feeds = {t._data: rng.standard_normal(t.shape).astype(dtype) for t in inputs}
    return g, outs, feeds


def _check(program, dtype):
    g, outs, feeds = _build(program, dtype)
    expected = run(g, outs, feeds)
    got, _ = run_optimized(g, outs, feeds)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    assert_same(expected, got, rtol=tol, atol=tol)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([np.float32, np.float64]))
def test_random_graphs_numpy_renderer(program, dtype):
    codegen.set_backend("numpy")
    try:
        _check(program, dtype)
    finally:
        codegen.set_backend(None)


# Derandomized, so the same kernels are generated every run and later runs load them from the disk cache.
@pytest.mark.skipif(not NumbaRenderer().available(), reason="numba is not installed")
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_graphs_numba_renderer(program):
    codegen.set_backend("numba")
    try:
        _check(program, np.float32)
    finally:
        codegen.set_backend(None)


@pytest.mark.slow
@pytest.mark.skipif(not NumbaRenderer().available(), reason="numba is not installed")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([np.float32, np.float64]))
def test_random_graphs_numba_renderer_many(program, dtype):
    codegen.set_backend("numba")
    try:
        _check(program, dtype)
    finally:
        codegen.set_backend(None)
