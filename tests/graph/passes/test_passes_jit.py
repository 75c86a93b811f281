"""Pass configuration (per call, process-wide, EMBER_PASSES) and ember.jit with passes on and off."""

import numpy as np
import pytest

import ember as em
from ember.graph import codegen
from ember.graph.passes import DEFAULT_PASSES, get_default_passes, resolve_passes, set_default_passes


def _ops(graph):
    return [n.op_name for n in graph.nodes if n.kind == "op"]


def test_passes_setting_forms():
    assert resolve_passes(None) == DEFAULT_PASSES
    assert resolve_passes(False) == () and resolve_passes([]) == ()
    assert resolve_passes(["cse", "dce"]) == ("cse", "dce")
    assert resolve_passes("cse, fusion") == ("cse", "fusion")
    with pytest.raises(ValueError, match="unknown graph pass 'inline'"):
        resolve_passes(["inline"])


def test_process_default_and_environment(monkeypatch):
    from ember import config

    monkeypatch.setenv("EMBER_PASSES", "dce,cse")
    assert get_default_passes() == ("dce", "cse")
    monkeypatch.setenv("EMBER_PASSES", "none")
    assert get_default_passes() == ("dce", "cse")  # the environment is read once, on first use
    config.reset("passes")
    assert get_default_passes() == ()
    set_default_passes(["fusion"])
    try:
        assert get_default_passes() == ("fusion",)
    finally:
        set_default_passes(None)
    monkeypatch.delenv("EMBER_PASSES")
    config.reset("passes")
    assert get_default_passes() == DEFAULT_PASSES


def _f(x):
    return (((x * 1) * 2 + 1).relu() - 0.5).abs()


def test_jit_passes_argument_and_lower_optimized():
    x = em.randn(6, 5)
    plain = em.jit(_f, passes=False)
    fused = em.jit(_f)
    only_alg = em.jit(_f, passes=["algebraic", "dce"])
    assert _ops(fused.lower(x)) == ["mul", "mul", "add", "relu", "sub", "abs"]  # lower(): unoptimised
    assert _ops(fused.lower(x, optimized=True)) == ["fused_elementwise"]
    assert _ops(plain.lower(x, optimized=True)) == _ops(plain.lower(x))
    assert _ops(only_alg.lower(x, optimized=True)) == ["mul", "add", "relu", "sub", "abs"]
    expected = _f(x).numpy()
    for fn in (plain, fused, only_alg):
        np.testing.assert_allclose(fn(x).numpy(), expected, rtol=1e-6)


def test_jit_uses_the_process_default():
    x = em.randn(4)
    set_default_passes(False)
    try:
        f = em.jit(_f)
        f(x)
        assert _ops(f.entries()[0].optimized) == _ops(f.lower(x))
    finally:
        set_default_passes(None)


def test_jitted_results_never_alias_inputs_or_captured_state():
    w = em.ones(3)
    v = em.full((3,), 2.0)

    @em.jit
    def identities(x):
        return x * 1, w + 0, x * 1

    x = em.arange(3.0)
    a, b, c = identities(x)
    assert not np.shares_memory(a.numpy(), x.numpy()) and not np.shares_memory(b.numpy(), w.numpy())
    assert not np.shares_memory(a.numpy(), c.numpy())

    @em.jit
    def swap():
        old_w = w * 1
        w.copy_(v * 1)
        v.copy_(old_w)

    swap()
    assert w.tolist() == [2, 2, 2] and v.tolist() == [1, 1, 1]


def _mlp_step(params, lr=0.05):
    w1, b1, w2, b2 = params

    def step(x, y):
        h = (x @ w1 + b1).relu()
        out = h @ w2 + b2
        loss = ((out - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with em.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
        return loss

    return step


def _params(seed):
    em.manual_seed(seed)
    return [em.randn(8, 16, requires_grad=True), em.zeros(16, requires_grad=True),
            em.randn(16, 4, requires_grad=True), em.zeros(4, requires_grad=True)]


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_mlp_training_is_the_same_with_passes_on_and_off(backend):
    codegen.set_backend(backend)
    try:
        on, off = _params(0), _params(0)
        step_on, step_off = em.jit(_mlp_step(on)), em.jit(_mlp_step(off), passes=False)
        assert "fused_elementwise" in _ops(step_on.lower(em.randn(32, 8), em.randn(32, 4), optimized=True))
        rng = np.random.default_rng(0)
        for _ in range(5):
            x = em.tensor(rng.standard_normal((32, 8)).astype(np.float32))
            y = em.tensor(rng.standard_normal((32, 4)).astype(np.float32))
            l_on, l_off = step_on(x, y).item(), step_off(x, y).item()
            if backend == "numpy":  # the same ufuncs in the same order: bit for bit
                assert l_on == l_off
            else:  # Numba sums in another order
                assert l_on == pytest.approx(l_off, rel=1e-6)
        for p, q in zip(on, off):
            if backend == "numpy":
                np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
            else:
                np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert step_on.trace_count == 2  # lower() and the first call
    finally:
        codegen.set_backend(None)
