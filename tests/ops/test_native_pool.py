"""NativePool (batch_threads' GIL-free workers): every argument kind reaches the kernel, each chunk gets its own
scratch row, workers and caller that slept are woken, arguments the block cannot carry and busy pools fall back
to Python threads with the same result, and processes fork and exit while workers poll or sleep."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from ember.ops import batch_norm_compiled, batch_threads, direct_conv, native_pool, spin_wait
from ember.ops.compiled import compile_source

pytest.importorskip("numba")

_SOURCE = '''
def scaled(x, counts, scale, flag, offset, out, scratch, lo, hi):
    # out[i] = +-(x[i, 0] * scale + offset) for i in lo..hi (+ with flag); scratch (the chunk's row) gets lo, hi
    scratch[0] = lo
    scratch[1] = hi
    for i in range(lo, hi):
        v = x[i, 0] * scale + offset + counts[0]
        out[i] = v if flag else -v


def raises_at(out, bad, lo, hi):
    # out[lo:hi] = 1, raising ValueError at index `bad`
    for i in range(lo, hi):
        if i == bad:
            raise ValueError("bad index")
        out[i] = 1.0


def slow_second_chunk(out, spins, lo, hi):
    # out[lo:hi] = 1, after `spins` iterations of busy work in every chunk but the first
    acc = 0.0
    if lo > 0:
        for i in range(spins):
            acc += (i % 7) * 1e-9
    for i in range(lo, hi):
        out[i] = 1.0 + acc * 0.0
'''


@pytest.fixture
def native(monkeypatch):
    if batch_threads.workers() < 2 or batch_threads._state["native"] is None:
        pytest.skip("one core, or no GIL-free pool on this platform")
    return batch_threads._state["native"]


def test_a_linux_machine_with_two_cores_and_numba_gets_the_native_pool():
    """The other tests skip without the pool; here its absence where it should run is a failure."""
    from ember.graph.codegen import get_backend

    if batch_threads.workers() < 2 or not native_pool.available() or get_backend() == "numpy":
        pytest.skip("one core, not Linux on x86-64 or AArch64, or the NumPy backend chosen")
    assert batch_threads._state["native"] is not None


def test_ember_native_split_turns_the_pool_off_and_a_bad_value_is_named(monkeypatch):
    if batch_threads.workers() < 2:
        pytest.skip("one core")
    monkeypatch.setattr(batch_threads, "_state", {})  # a fresh start, as in a new process
    monkeypatch.setenv("EMBER_NATIVE_SPLIT", "0")
    assert batch_threads.workers() > 1 and batch_threads._state["native"] is None
    monkeypatch.setattr(batch_threads, "_state", {})
    monkeypatch.setenv("EMBER_NATIVE_SPLIT", "off")
    with pytest.raises(ValueError, match="EMBER_NATIVE_SPLIT must be 0 \\(off\\) or 1 \\(on\\), got 'off'"):
        batch_threads.workers()


def _scaled_case(n=11):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    counts = np.array([3], np.int64)
    want = -(x[:, 0].astype(np.float64) * 0.5 + 2 + 3)
    return x, counts, want


def test_every_argument_kind_reaches_the_kernel_and_each_chunk_its_own_row(native):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    parts = batch_threads.split(11, 2)
    out = np.zeros(11)
    scratch = np.zeros((2, 2), np.int64)
    done = int(native._ctl[1])
    batch_threads.run_kernel(kernel, parts, (x, counts, 0.5, False, 2, out), (scratch,))
    np.testing.assert_array_equal(out, want)
    assert scratch.tolist() == [list(p) for p in parts]
    assert int(native._ctl[1]) == done + 1  # the worker ran chunk 1
    batch_threads.run_kernel(kernel, parts, (x, counts, np.float64(0.5), np.bool_(True), np.int64(2), out), (scratch,))
    np.testing.assert_array_equal(out, -want)


@pytest.mark.parametrize("view", ["every second row", "rows reversed", "a transposed copy"])
def test_strided_arrays_reach_the_kernel_as_the_views_they_are(native, view):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    wide = np.repeat(x, 2, axis=0)
    x = {"every second row": wide[::2], "rows reversed": x[::-1].copy()[::-1],
         "a transposed copy": np.ascontiguousarray(x.T).T}[view]
    assert not x.flags.c_contiguous
    out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
    done = int(native._ctl[1])
    batch_threads.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, False, 2, out), (scratch,))
    np.testing.assert_array_equal(out, want)
    assert int(native._ctl[1]) == done + 1


@pytest.mark.parametrize("why", ["float32 scalar", "busy pool"])
def test_what_the_block_cannot_carry_runs_on_python_threads_with_the_same_result(native, why):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
    scale = np.float32(0.5) if why == "float32 scalar" else 0.5
    assert native_pool._kinds((x, counts, scale, False, 2, out), (scratch,)) is None or why == "busy pool"
    done = int(native._ctl[1])
    if why == "busy pool":
        native._busy.acquire()
    try:
        batch_threads.run_kernel(kernel, batch_threads.split(11, 2), (x, counts, scale, False, 2, out), (scratch,))
    finally:
        if why == "busy pool":
            native._busy.release()
    np.testing.assert_array_equal(out, want)
    assert scratch.tolist() == [[0, 5], [5, 11]]
    assert int(native._ctl[1]) == done  # not through the native workers


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the cfunc's wrapper prints it
@pytest.mark.parametrize("bad", [2, 7])  # in the caller's chunk, in the worker's
def test_an_exception_in_any_chunk_reaches_the_caller(native, bad):
    kernel = compile_source(_SOURCE, "raises_at")
    with pytest.raises(ValueError, match="bad index"):
        batch_threads.run_kernel(kernel, [(0, 5), (5, 10)], (np.zeros(10), bad))
    out = np.zeros(10)
    batch_threads.run_kernel(kernel, [(0, 5), (5, 10)], (out, 10))  # the pool still works
    np.testing.assert_array_equal(out, 1.0)


def test_a_task_that_cannot_be_built_runs_on_python_threads_from_then_on(native, monkeypatch):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    args = (x.astype(np.float64), counts, 0.5, False, 2)  # float64 x: kinds no other test builds

    def broken(kernel, kinds):
        raise RuntimeError("no LLVM today")

    monkeypatch.setattr(native_pool, "_chunk_source", broken)
    for _ in range(2):
        out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
        done = int(native._ctl[1])
        batch_threads.run_kernel(kernel, [(0, 5), (5, 11)], args + (out,), (scratch,))
        np.testing.assert_array_equal(out, want)
        assert int(native._ctl[1]) == done
    assert native_pool._compiled(kernel, native_pool._kinds(args + (out,), (scratch,))) is None


def test_a_split_inside_a_python_threads_split_runs_its_chunks_there(native):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    done = int(native._ctl[1])

    def chunk(a, b):
        out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
        batch_threads.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, False, 2, out), (scratch,))
        return out, scratch

    for out, scratch in batch_threads.run(chunk, 2):
        np.testing.assert_array_equal(out, want)
        assert scratch.tolist() == [[0, 5], [5, 11]]
    assert int(native._ctl[1]) == done  # not a third thread beside the two already running


def test_a_sleeping_worker_and_a_sleeping_caller_are_woken(native):
    kernel = compile_source(_SOURCE, "slow_second_chunk")
    out = np.zeros(8)
    batch_threads.run_kernel(kernel, [(0, 4), (4, 8)], (out, 0))
    deadline = time.perf_counter() + 5
    while native._ctl[5] != 1 and time.perf_counter() < deadline:  # past IDLE_POLL_US the worker sleeps on its futex
        time.sleep(0.001)
    assert native._ctl[5] == 1
    start = time.perf_counter()
    spins = 1
    while time.perf_counter() - start < 0.02:  # until the worker's chunk outlasts the caller's RESULT_POLL_US
        spins *= 4
        out[:] = 0
        begun = time.perf_counter()
        batch_threads.run_kernel(kernel, [(0, 4), (4, 8)], (out, spins))
        np.testing.assert_array_equal(out, 1.0)
        if time.perf_counter() - begun > 4 * native_pool.RESULT_POLL_US * 1e-6:
            break
    assert native._ctl[6] == 0  # the caller, woken, no longer marked asleep


def test_a_split_on_python_threads_sends_idle_native_workers_to_sleep(native):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
    batch_threads.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, False, 2, out), (scratch,))
    assert native._ctl[native_pool.QUIET_SLOT] == 0  # a native split clears it
    batch_threads.run(lambda a, b: b - a, 9)  # a split on the Python threads
    assert native._ctl[native_pool.QUIET_SLOT] == 1
    deadline = time.perf_counter() + 5
    while native._ctl[5] != 1 and time.perf_counter() < deadline:  # the worker sleeps on its futex
        time.sleep(0.0001)
    assert native._ctl[5] == 1
    out[:] = 0
    batch_threads.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, False, 2, out), (scratch,))
    np.testing.assert_array_equal(out, want)


def test_thousands_of_splits_in_a_row_each_run_every_chunk(native):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case(64)
    scratch = np.zeros((2, 2), np.int64)
    for i in range(3000):
        out = np.zeros(64)
        batch_threads.run_kernel(kernel, [(0, 1 + i % 63), (1 + i % 63, 64)], (x, counts, 0.5, False, 2, out),
                                 (scratch,))
        assert out[0] == want[0] and out[-1] == want[-1]


@pytest.mark.parametrize("layout", ["contiguous", "transposed b", "strided a"])
def test_ember_gemm_splits_on_the_native_workers_for_any_layout(native, layout):
    from ember.ops import sgemm_compiled

    if sgemm_compiled.driver() is None:
        pytest.skip("no micro-kernel here")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 96, 300)).astype(np.float32)
    b = rng.standard_normal((4, 300, 200)).astype(np.float32)
    if layout == "transposed b":
        b = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    if layout == "strided a":
        a = np.repeat(a, 2, axis=2)[:, :, ::2]
    for batch in (slice(None), slice(0, 1)):  # split by batch entries, then by panels
        out = np.empty((a[batch].shape[0], 96, 200), np.float32)
        done = int(native._ctl[1])
        sgemm_compiled.sgemm(a[batch], b[batch], out)
        assert int(native._ctl[1]) == done + 1  # the worker ran a chunk: the task was built
        np.testing.assert_allclose(out, np.matmul(a[batch], b[batch]), rtol=1e-4, atol=1e-3)


def test_a_pool_stops_its_workers_on_close():
    found = spin_wait.waiter()
    pool = native_pool.make(2, found[1]) if found is not None else None
    if pool is None:
        pytest.skip("no GIL-free pool on this platform")
    pool.close()
    assert not any(t.is_alive() for t in pool._threads)


def _bn_and_direct_conv():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    y, mean, var = batch_norm_compiled.batch_norm_forward(np, x, None, None, 1e-5, then_relu=True)
    grads = batch_norm_compiled.batch_norm_backward(np, x, None, mean, var, gy, None, None, 1e-5, relu_out=y)
    out = direct_conv.conv2d(x, w, 1, (1, 1, 1, 1))
    wgrad = direct_conv.weight_grad(x, gy, 1, (1, 1, 1, 1), (3, 3))
    igrad = direct_conv.input_grad_stride2(gy[:, :, :10, :10], w, (1, 1, 1, 1), (20, 20))
    return [y, mean, var, *grads, out, wgrad, igrad]


def test_batch_norm_and_direct_convolution_give_the_same_bits_on_either_pool(native, monkeypatch):
    monkeypatch.setattr(batch_threads, "_MIN_FLOPS", 0)
    monkeypatch.setattr(batch_threads, "_MIN_NATIVE_FLOPS", 0)
    monkeypatch.setattr(batch_norm_compiled, "_SPLIT_MIN", 0)
    monkeypatch.setattr(batch_norm_compiled, "_NATIVE_SPLIT_MIN", 0)
    if not direct_conv.applies((8, 16, 20, 20), (16, 16, 3, 3), np.float32, (1, 1), (1, 1, 1, 1), (1, 1), 1):
        pytest.skip("no direct convolution here")
    done = int(native._ctl[1])
    fast = _bn_and_direct_conv()
    assert int(native._ctl[1]) > done
    monkeypatch.setitem(batch_threads._state, "native", None)
    for a, b in zip(fast, _bn_and_direct_conv()):
        np.testing.assert_array_equal(a, b)


_CHILD = """
import os, sys, time
import numpy as np
from ember.ops import batch_threads, batch_norm_compiled
batch_norm_compiled._SPLIT_MIN = batch_norm_compiled._NATIVE_SPLIT_MIN = 0
x = np.random.default_rng(0).standard_normal((8, 8, 16, 16)).astype(np.float32)
y = batch_norm_compiled.batch_norm_forward(np, x, None, None, 1e-5)[0]
assert batch_threads._state["native"] is not None
if sys.argv[1] == "sleep":
    time.sleep(0.05)  # the worker sleeps on its futex
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:
        z = batch_norm_compiled.batch_norm_forward(np, x, None, None, 1e-5)[0]
        os._exit(0 if np.array_equal(y, z) and batch_threads._state["native"] is not None else 3)
    assert os.waitpid(pid, 0)[1] == 0
print("ok")
"""


@pytest.mark.parametrize("how", ["exit", "sleep", "fork"])
def test_a_process_forks_or_exits_while_workers_poll_or_sleep(native, how):
    env = {**os.environ, "EMBER_CONV_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", _CHILD, how], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
