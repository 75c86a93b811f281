"""Async eager mode: ops return pending values at once; reads, prints and in-place writes synchronise."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ember as em
from ember.runtime.async_eager import PendingArray
from ember.runtime.engine import EngineError


@pytest.fixture
def async_mode():
    em.set_async(True)
    try:
        yield
    finally:
        em.set_async(False)


def _train(steps=3):
    em.manual_seed(0)
    nn = em.nn
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = em.randn(32, 12), em.randint(0, 4, (32,))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_training_in_async_mode_equals_sync_mode():
    ref = _train()
    em.set_async(True)
    try:
        got = _train()
    finally:
        em.set_async(False)
    assert got[0] == ref[0]
    for a, b in zip(got[1], ref[1]):
        np.testing.assert_array_equal(a, b)


def test_results_are_pending_until_read(async_mode):
    a = em.randn(64, 64)
    b = (a @ a).tanh()
    assert isinstance(b._data, PendingArray)
    assert b.shape == (64, 64) and b.dtype == em.float32  # known without waiting
    host = b.numpy()  # waits
    assert type(b._data) is np.ndarray and host is b._data
    a64 = a.numpy().astype(np.float64)
    np.testing.assert_allclose(host, np.tanh(a64 @ a64), rtol=1e-5, atol=1e-5)  # float32 sums of 64 products


@pytest.mark.parametrize("read", [
    lambda t: t.item(), lambda t: float(t), lambda t: repr(t), lambda t: str(t), lambda t: t.tolist(),
    lambda t: np.asarray(t), lambda t: bool(t > 0),
])
def test_every_read_synchronises(async_mode, read):
    t = (em.ones(()) * 3).exp()
    read(t)
    assert type(t._data) is np.ndarray or t._data.value is not None  # the value was computed
    assert t.item() == pytest.approx(np.exp(3.0), rel=1e-6)


def test_print_shows_values(async_mode, capsys):
    print(em.ones(2) * 2)
    assert "tensor([2., 2.])" in capsys.readouterr().out


def test_in_place_writes_wait_for_queued_readers(async_mode):
    x = em.randn(300, 300)
    x0 = x.numpy().copy()
    z = x * 2  # queued: reads x
    x.add_(1)  # must not change what z sees
    x[0] = 0.0
    np.testing.assert_array_equal(z.numpy(), x0 * 2)
    expect = x0 + 1
    expect[0] = 0
    np.testing.assert_array_equal(x.numpy(), expect)


def test_views_and_data_dependent_ops_run_now(async_mode):
    x = em.arange(6.0) * 1.0
    v = x.reshape(2, 3)
    assert type(v._data) is np.ndarray  # views are made synchronously from the waited-for input
    nz = em.nonzero(x > 2)
    assert type(nz._data) is np.ndarray and nz.shape == (3, 1)


def test_kernel_errors_surface_at_the_next_sync_with_the_op_name(async_mode):
    a = em.ones(3, dtype=em.int64)
    b = a // 0  # fails in the engine
    c = b + 1  # depends on the failed value: skipped
    with pytest.raises(EngineError, match="floor_divide"):
        c.numpy()
    d = em.ones(2) + 1
    assert d.tolist() == [2, 2]  # later work is unaffected


def test_errors_also_surface_at_synchronize(async_mode):
    a = em.ones(3, dtype=em.int64)
    _ = a % 0
    with pytest.raises(EngineError, match="remainder"):
        em.synchronize()
    em.synchronize()  # reported once


def test_jit_accepts_pending_inputs(async_mode):
    f = em.jit(lambda t: (t * 2).sum())
    x = em.ones(4) + 1
    assert f(x).item() == 16


def test_shape_errors_are_raised_at_the_call(async_mode):
    with pytest.raises(ValueError, match="matmul"):
        em.ones(2, 3) @ em.ones(4, 5)


def test_env_var_turns_async_on_from_import():
    code = "import ember as em; x = em.ones(3) * 2; print(type(x._data).__name__, x.sum().item(), em.is_async())"
    env = dict(os.environ, EMBER_ASYNC="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PendingArray", "6.0", "True"]


_UNSYNCED = """
import sys
import ember as em
em.set_async(True)
a = em.ones(3, dtype=em.int64)
b = a // (1 if sys.argv[1] == "ok" else 0)  # 0: fails in the engine, and nothing reads b
print("script done", flush=False)
if sys.argv[1] == "caught":
    try:
        em.synchronize()
    except RuntimeError as e:
        print("caught", e)
"""


def _run(mode):
    return subprocess.run([sys.executable, "-c", _UNSYNCED, mode], capture_output=True, text=True, timeout=120)


def test_an_error_nothing_synchronised_fails_the_exit_and_names_the_op():
    out = _run("exit")
    assert out.returncode == 1
    assert "script done" in out.stdout  # output written before the exit is flushed
    assert "floor_divide failed" in out.stderr and "never synchronised" in out.stderr
    assert "ZeroDivisionError" in out.stderr or "divide" in out.stderr


@pytest.mark.parametrize("mode", ["caught", "ok"])
def test_an_error_reported_or_no_error_exits_cleanly(mode):
    out = _run(mode)
    assert out.returncode == 0, out.stderr
    assert "never synchronised" not in out.stderr
    if mode == "caught":
        assert "caught floor_divide failed" in out.stdout


def test_turning_async_off_raises_the_pending_error():
    em.set_async(True)
    try:
        _ = em.ones(3, dtype=em.int64) % 0
    finally:
        with pytest.raises(EngineError, match="remainder"):
            em.set_async(False)
    assert not em.is_async()
    em.synchronize()  # reported once
