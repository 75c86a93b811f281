"""The worker pool: Python tasks and compiled kernels' chunks run on the same workers, results in order, errors
raised in the caller, sleeping workers and callers woken, busy or nested splits run inline, arguments the GIL-free
path cannot carry run as Python tasks with the same result, and a process that forks or exits while workers poll."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ember.kernels import background, parallel, thread_pool
from ember.kernels.numba_loader import compile_source

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


def shifted(x, counts, scale, flag, offset, out, scratch, lo, hi):
    # scaled's arguments, another kernel: out[i] = x[i, 0] + offset for i in lo..hi
    for i in range(lo, hi):
        out[i] = x[i, 0] + offset


def counted(out, lo, hi):
    # out[lo:hi] = 1, returning how many it set (a kernel with a result)
    for i in range(lo, hi):
        out[i] = 1.0
    return hi - lo


def summed_rows(x, out, lo, hi):
    # out[i] = x[i, :].sum() for i in lo..hi (compiled below for read-only "A" x only)
    for i in range(lo, hi):
        out[i] = x[i, :].sum()


def slow_second_chunk(out, spins, lo, hi):
    # out[lo:hi] = 1, after `spins` iterations of busy work in every chunk but the first
    acc = 0.0
    if lo > 0:
        for i in range(spins):
            acc += (i % 7) * 1e-9
    for i in range(lo, hi):
        out[i] = 1.0 + acc * 0.0
'''

POSTED, DONE, WORKER_ASLEEP, CALLER_ASLEEP = 0, 1, 5, 6  # _LOOPS' control-row slots


@pytest.fixture(params=["native", "python"])
def pool(request, monkeypatch):
    """A two-worker pool: GIL-free workers (where Numba runs on Linux), or plain threads."""
    if request.param == "native" and not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    if request.param == "python":
        monkeypatch.setattr(thread_pool, "native_available", lambda: False)
    made = thread_pool.Pool(2)
    assert made.native is (request.param == "native")
    yield made
    made.close()
    assert not any(t.is_alive() for t in made._threads)


def _name():
    return threading.current_thread().name


def test_python_tasks_come_back_in_order_and_run_on_the_workers(pool):
    for _ in range(50):
        assert pool.run([lambda k=k: k * k for k in range(3)]) == [0, 1, 4]
    names = pool.run([_name] * 3)
    assert names[0] == threading.current_thread().name
    assert sorted(names[1:]) == ["ember-worker-0", "ember-worker-1"]


def test_tasks_run_at_the_same_time(pool):
    barrier = threading.Barrier(3, timeout=10)  # passes only if all three tasks are running at once
    assert pool.run([barrier.wait] * 3) is not None


def test_an_error_in_any_task_is_raised_in_the_caller_after_all_tasks_finish(pool):
    finished = []

    def slow():
        time.sleep(0.05)
        finished.append(1)

    def bad():
        raise ValueError("task 2 failed")

    with pytest.raises(ValueError, match="task 2 failed"):
        pool.run([lambda: None, slow, bad])
    assert finished == [1]
    assert pool.run([lambda: 1, lambda: 2]) == [1, 2]  # the workers are free again


def test_nested_concurrent_and_oversized_splits_run_inline(pool):
    inner = []

    def outer_task():
        inner.append(pool.run([_name, _name]))  # the pool is busy: both in this thread
        return _name()

    names = pool.run([outer_task, outer_task])
    # each task's inner split ran both halves in its own thread (inner is in the order the tasks finished)
    assert sorted(inner) == sorted([name, name] for name in names)
    assert pool.run([_name] * 4) == [threading.current_thread().name] * 4  # more tasks than workers


def test_a_sleeping_worker_and_a_sleeping_caller_are_woken(pool):
    # past IDLE_POLL_US the workers sleep; on a loaded machine a worker may be scheduled late, so wait for it
    deadline = time.monotonic() + 5
    while pool.native and pool._ctl[WORKER_ASLEEP] != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    if pool.native:
        assert pool._ctl[WORKER_ASLEEP] == 1
    long_task = 3 * thread_pool.RESULT_POLL_US * 1e-6
    assert pool.run([lambda: "caller", lambda: time.sleep(long_task) or "worker"]) == ["caller", "worker"]
    if pool.native:
        assert pool._ctl[CALLER_ASLEEP] == 0


def _scaled_case(n=11):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    counts = np.array([3], np.int64)
    want = -(x[:, 0].astype(np.float64) * 0.5 + 2 + 3)
    return x, counts, want


@pytest.fixture
def native_pool():
    if not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    made = thread_pool.Pool(2)
    yield made
    made.close()


def _entry_points_loaded(pool, kernel, head, parted, chunks, strided: bool = False) -> None:
    """One split of `kernel` on copies of its arrays, which hands its kinds' entry points to the compiler thread
    (where not in memory, a split's chunks run in the caller while they load or compile), and a wait for them."""
    copied = lambda args: tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)  # noqa: E731
    assert pool.try_run_kernel(kernel, copied(head), copied(parted), chunks, strided)
    background.wait()


def test_every_argument_kind_reaches_a_compiled_kernel_and_each_chunk_its_own_row(native_pool):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    chunks = np.array([(0, 4), (4, 8), (8, 11)], np.int64)
    out, scratch = np.zeros(11), np.zeros((3, 2), np.int64)
    _entry_points_loaded(native_pool, kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
    done = [int(native_pool._ctl[16 * w + DONE]) for w in range(2)]
    assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
    np.testing.assert_array_equal(out, want)
    assert scratch.tolist() == chunks.tolist()
    assert [int(native_pool._ctl[16 * w + DONE]) for w in range(2)] == [d + 1 for d in done]  # workers ran 1, 2
    args = (x, counts, np.float64(0.5), np.bool_(True), np.int64(2), out)
    assert native_pool.try_run_kernel(kernel, args, (scratch,), chunks)
    np.testing.assert_array_equal(out, -want)


def test_a_parted_array_whose_rows_lie_apart_gives_each_chunk_its_own_row(native_pool):
    # each chunk's scratch on pages of its own (direct._scratch): rows C-contiguous, a gap between them
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    chunks = np.array([(0, 4), (4, 8), (8, 11)], np.int64)
    out, spaced = np.zeros(11), np.full((3, 512), -1, np.int64)
    scratch = spaced[:, :2]
    assert thread_pool._kinds((x, counts, 0.5, False, 2, out), (scratch,)) is not None
    assert thread_pool._kinds((x, counts, 0.5, False, 2, out), (spaced[:, ::2],)) is None  # rows not contiguous
    assert thread_pool._kinds((x, counts, 0.5, False, 2, out), (spaced[::-1, :2],)) is None  # rows out of order
    _entry_points_loaded(native_pool, kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
    assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
    np.testing.assert_array_equal(out, want)
    assert scratch.tolist() == chunks.tolist()
    assert (spaced[:, 2:] == -1).all()  # nothing written between the rows


@pytest.mark.parametrize("view", ["transposed", "every second row"])
def test_strided_arrays_reach_the_kernel_as_the_views_they_are(native_pool, view):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    x = np.ascontiguousarray(x.T).T if view == "transposed" else np.repeat(x, 2, axis=0)[::2]
    out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
    assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,),
                                      np.array([(0, 5), (5, 11)], np.int64))
    np.testing.assert_array_equal(out, want)


def test_one_launcher_serves_every_layout_and_write_flag_of_a_strided_kinds(native_pool):
    # typed by the values, a C-, an F-ordered and a transposed operand compiled it once each, in the caller
    from numba import types

    read = types.Array(types.float64, 2, "A", readonly=True)
    kernel = compile_source(_SOURCE, "summed_rows",
                            signature=types.void(read, types.float64[::1], types.int64, types.int64))
    chunks = np.array([(0, 3), (3, 6)], np.int64)
    x = np.arange(12.0).reshape(6, 2)
    _entry_points_loaded(native_pool, kernel, (x, np.zeros(6)), (), chunks)
    kinds = thread_pool._kinds((x, np.zeros(6)), (), strided=True)
    _entry_points_loaded(native_pool, kernel, (x, np.zeros(6)), (), chunks, strided=True)
    launch = thread_pool._entries[kinds][1]
    read_only = np.asfortranarray(x)
    read_only.flags.writeable = False
    for view in (x, read_only, np.ascontiguousarray(x.T).T, np.repeat(x, 2, axis=0)[::2]):
        out = np.zeros(6)
        assert native_pool.try_run_kernel(kernel, (view, out), (), chunks, strided=True)
        np.testing.assert_array_equal(out, x.sum(axis=1))
    assert list(launch.overloads) == [thread_pool._launch_types(kinds)]
    assert thread_pool._chunks[(id(kernel), kinds)][1] is not None  # ran on the GIL-free path


def test_kernels_of_the_same_argument_kinds_share_one_entry_point_that_calls_each_by_address(native_pool):
    # the entry point does not hold the kernel's code (linking it compiled the kernel a second time)
    x, counts, want = _scaled_case()
    chunks = np.array([(0, 5), (5, 11)], np.int64)
    kinds = None
    for name, expected in (("scaled", want), ("shifted", x[:, 0] + 2)):
        kernel = compile_source(_SOURCE, name)
        out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
        assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
        np.testing.assert_array_equal(out, expected)
        kinds = thread_pool._kinds((x, counts, 0.5, False, 2, out), (scratch,))
        assert thread_pool._chunks[(id(kernel), kinds)][1] is not None  # ran on the GIL-free path
    task = thread_pool._entries[kinds][0]
    code = task.inspect_llvm()
    assert "scaled" not in code and "shifted" not in code


def test_a_kernel_compiled_for_read_only_any_layout_arrays_takes_writable_contiguous_ones(native_pool):
    from numba import types

    read = types.Array(types.float64, 2, "A", readonly=True)
    kernel = compile_source(_SOURCE, "summed_rows",
                            signature=types.void(read, types.float64[::1], types.int64, types.int64))
    x = np.arange(12.0).reshape(6, 2)
    out = np.zeros(6)
    _entry_points_loaded(native_pool, kernel, (x, out), (), np.array([(0, 3), (3, 6)], np.int64))
    assert native_pool.try_run_kernel(kernel, (x, out), (), np.array([(0, 3), (3, 6)], np.int64))
    np.testing.assert_array_equal(out, x.sum(axis=1))
    assert thread_pool._chunks[(id(kernel), thread_pool._kinds((x, out), ()))][1] is not None


_FROM_DISK = """
import sys, numpy as np, ember as em
from ember.kernels import parallel, thread_pool
from ember.kernels.numba_loader import compile_source
em.set_num_threads(2); em.use_deterministic_algorithms(True)
kernel = compile_source(sys.argv[1], "scaled")
x, counts = np.arange(22.0).reshape(11, 2), np.zeros(1, np.int64)
out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
from ember.kernels import background
kinds = thread_pool._kinds((x, counts, 0.5, True, 2, out), (scratch,))
first = (id(kernel), kinds) in thread_pool._chunks
parallel.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, True, 2, out), (scratch,))
ok = out.tolist() == (x[:, 0] * 0.5 + 2).tolist()
background.wait()  # where they were not on disk, the entry points compiled on the compiler thread meanwhile
out[:] = 0
parallel.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, 0.5, True, 2, out), (scratch,))
native = parallel.native() and thread_pool._chunks[(id(kernel), kinds)][1] > 0
print(ok and out.tolist() == (x[:, 0] * 0.5 + 2).tolist() and not first, native)
"""


def test_a_kernel_and_its_entry_point_loaded_from_disk_run_on_the_gil_free_path(tmp_path):
    # the kernel's address is taken from code Numba loaded from its cache, not compiled in this process
    if not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    env = dict(os.environ, EMBER_CACHE=str(tmp_path))
    for _ in range(2):  # compiled and written, then loaded
        done = subprocess.run([sys.executable, "-c", _FROM_DISK, _SOURCE], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["True", "True"]


def test_where_kernels_compile_where_called_missing_entry_points_compile_on_the_compiler_thread(tmp_path):
    """use_deterministic_algorithms(True), an empty cache: a split's first call runs its chunks in the caller, one
    after another, while the compiler thread builds the entry points; the next call after that runs on the pool,
    with the same bits."""
    if not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    code = """
import sys, numpy as np, ember as em
from ember.kernels import background, parallel, thread_pool
from ember.kernels.numba_loader import compile_source
em.set_num_threads(2); em.use_deterministic_algorithms(True)
kernel = compile_source(sys.argv[1], "scaled")
x, counts = np.arange(22.0).reshape(11, 2), np.zeros(1, np.int64)
out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
args = (x, counts, 0.5, True, 2, out)
kinds = thread_pool._kinds(args, (scratch,))
parallel.run_kernel(kernel, [(0, 5), (5, 11)], args, (scratch,))
first = out.copy()
caller_only = (id(kernel), kinds) not in thread_pool._chunks and background.handed_over(("entry points", (id(kernel), kinds)))
background.wait()
out[:] = 0
parallel.run_kernel(kernel, [(0, 5), (5, 11)], args, (scratch,))
print(caller_only, thread_pool._chunks[(id(kernel), kinds)][1] > 0, first.tolist() == out.tolist() == (x[:, 0] * 0.5 + 2).tolist())
"""
    env = dict(os.environ, EMBER_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code, _SOURCE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_a_kernel_with_a_result_runs_as_python_tasks(split_everything):
    kernel = compile_source(_SOURCE, "counted")
    out = np.zeros(10)
    parallel.run_kernel(kernel, [(0, 5), (5, 10)], (out,))
    np.testing.assert_array_equal(out, np.ones(10))
    if parallel.native():
        assert thread_pool._compiled(kernel, thread_pool._kinds((out,), ())) is None


@pytest.mark.parametrize("why", ["float32 scalar", "strided scratch", "busy pool"])
def test_what_the_block_cannot_carry_runs_as_python_tasks_with_the_same_result(split_everything, why):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    scale, scratch = 0.5, np.zeros((2, 2), np.int64)
    if why == "float32 scalar":
        scale = np.float32(0.5)
    elif why == "strided scratch":
        scratch = np.zeros((2, 4), np.int64)[:, ::2]
    assert (thread_pool._kinds((x, counts, scale, False, 2, np.zeros(11)), (scratch,)) is None) is (why != "busy pool")
    pool = parallel._pool()
    if why == "busy pool":
        pool._busy.acquire()
    try:
        out = np.zeros(11)
        parallel.run_kernel(kernel, [(0, 5), (5, 11)], (x, counts, scale, False, 2, out), (scratch,))
    finally:
        if why == "busy pool":
            pool._busy.release()
    np.testing.assert_array_equal(out, want)
    assert scratch.tolist() == [[0, 5], [5, 11]]


def test_a_task_that_cannot_be_built_runs_as_python_tasks_from_then_on(split_everything, monkeypatch):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    args = (x.astype(np.float64), counts, 0.5, False, 2)  # float64 x: kinds no other test builds

    def broken(kinds):
        raise RuntimeError("no LLVM today")

    monkeypatch.setattr(thread_pool, "_chunk_source", broken)
    for _ in range(2):
        out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
        parallel.run_kernel(kernel, [(0, 5), (5, 11)], args + (out,), (scratch,))
        np.testing.assert_array_equal(out, want)
    if parallel.native():
        assert thread_pool._compiled(kernel, thread_pool._kinds(args + (out,), (scratch,))) is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the cfunc's wrapper prints it
@pytest.mark.parametrize("bad", [2, 8])  # in the caller's chunk, in the worker's
def test_an_exception_in_any_chunk_of_a_kernel_reaches_the_caller(split_everything, bad):
    kernel = compile_source(_SOURCE, "raises_at")
    with pytest.raises(ValueError, match="bad index"):
        parallel.run_kernel(kernel, [(0, 5), (5, 10)], (np.zeros(10), bad))


def test_one_chunk_of_a_kernel_the_pool_has_run_runs_in_the_caller_through_its_entry_point(split_everything):
    if not parallel.native():
        pytest.skip("no GIL-free workers on this platform")
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case()
    head = (x, counts, 0.5, False, 2)
    scratch = np.zeros((1, 2), np.int64)
    unseen = (x.astype(np.float64),) + head[1:] + (np.zeros(11),)  # argument kinds no test runs on the pool
    assert not thread_pool.run_ready_chunk(kernel, unseen, (scratch,), 0, 11)
    out = np.zeros(11)
    parallel.run_kernel(kernel, [(0, 5), (5, 11)], head + (out,), (np.zeros((2, 2), np.int64),))
    np.testing.assert_array_equal(out, want)
    for flag, sign in ((False, 1), (True, -1)):  # a changed argument between calls reaches the kernel
        out = np.zeros(11)
        assert thread_pool.run_ready_chunk(kernel, (x, counts, 0.5, flag, 2, out), (scratch,), 0, 11)
        np.testing.assert_array_equal(out, sign * want)
        assert scratch.tolist() == [[0, 11]]
    out = np.zeros(11)
    parallel.run_kernel(kernel, [(3, 9)], head + (out,), (scratch,))  # run_kernel's one chunk goes the same way
    np.testing.assert_array_equal(out[3:9], want[3:9])
    assert not out[:3].any() and not out[9:].any() and scratch.tolist() == [[3, 9]]
    other = compile_source(_SOURCE, "shifted")  # another kernel, not run by the pool on those kinds
    assert not thread_pool.run_ready_chunk(other, unseen, (scratch,), 0, 11)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_exception_in_a_one_chunk_kernel_the_pool_has_run_reaches_the_caller(split_everything):
    kernel = compile_source(_SOURCE, "raises_at")
    parallel.run_kernel(kernel, [(0, 5), (5, 10)], (np.zeros(10), 99))
    with pytest.raises(ValueError, match="bad index"):
        parallel.run_kernel(kernel, [(0, 10)], (np.zeros(10), 4))


def test_thousands_of_kernel_splits_in_a_row_each_run_every_chunk(native_pool):
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case(64)
    scratch = np.zeros((2, 2), np.int64)
    for i in range(3000):
        out = np.zeros(64)
        chunks = np.array([(0, 1 + i % 63), (1 + i % 63, 64)], np.int64)
        assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
        assert out[0] == want[0] and out[-1] == want[-1]


def test_a_chunk_its_worker_never_starts_runs_in_the_caller(native_pool):
    """A worker kept off its core (another library's threads spinning there) must cost no wait: with the workers
    gone, every chunk still runs, in the caller, each with its own row. Without this the split would wait forever."""
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case(9)
    out, scratch = np.zeros(9), np.zeros((3, 2), np.int64)
    chunks = np.array([(0, 3), (3, 6), (6, 9)], np.int64)
    assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)  # compiled
    native_pool.close()  # the workers' loops return: nobody takes a post from now on
    out[:] = 0
    scratch[:] = 0
    ran = []
    caller = threading.Thread(target=lambda: ran.append(native_pool.try_run_kernel(
        kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)), daemon=True)
    caller.start()
    caller.join(timeout=30)
    assert ran == [True], "the split waited for workers that never came"
    np.testing.assert_allclose(out, want)
    assert scratch.tolist() == [[0, 3], [3, 6], [6, 9]]


def test_late_workers_skip_the_chunks_the_caller_took_and_serve_the_next_split(native_pool):
    # a sleeping worker wakes after the caller, done with a one-row first chunk, has taken the second; it must not
    # run that chunk again, and must take the next split's chunk as usual
    kernel = compile_source(_SOURCE, "scaled")
    x, counts, want = _scaled_case(64)
    scratch = np.zeros((2, 2), np.int64)
    ran = []
    for i in range(60):
        if i % 3 == 0:
            time.sleep((thread_pool.IDLE_POLL_US + 200) * 1e-6)  # the workers go to sleep
        out = np.zeros(64)
        chunks = np.array([(0, 1), (1, 64)], np.int64)
        assert native_pool.try_run_kernel(kernel, (x, counts, 0.5, False, 2, out), (scratch,), chunks)
        np.testing.assert_allclose(out, want)
        if i % 2:  # a Python task posted right after: it runs once, on the worker
            assert native_pool.run([lambda: None, lambda: ran.append(_name())]) == [None, None]
    assert ran == ["ember-worker-0"] * 30


def test_python_tasks_and_kernels_alternate_on_the_same_workers(native_pool):
    kernel = compile_source(_SOURCE, "slow_second_chunk")
    for i in range(200):
        out = np.zeros(8)
        assert native_pool.try_run_kernel(kernel, (out, i % 3), (), np.array([(0, 4), (4, 8)], np.int64))
        assert out.tolist() == [1.0] * 8
        assert native_pool.run([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]


_CHILD = """
import os, sys, time
import numpy as np
from ember.kernels import parallel
parallel.set_num_threads(2)
assert parallel.parallel_for(4, lambda a, b: (a, b)) == [(0, 2), (2, 4)]
if sys.argv[1] == "sleep":
    time.sleep(0.05)  # the workers sleep on their futexes
pid = os.fork() if sys.argv[1] == "fork" else 0
if pid == 0:
    print(parallel.parallel_for(4, lambda a, b: (a, b)), flush=True)  # a forked child makes its own workers
    if sys.argv[1] == "fork":
        os._exit(0)
else:
    assert os.waitpid(pid, 0)[1] == 0
print("ok")
"""


@pytest.mark.parametrize("how", ["exit", "sleep", "fork"])
def test_a_process_forks_or_exits_while_workers_poll_or_sleep(two_threads, how):
    done = subprocess.run([sys.executable, "-c", _CHILD, how], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
    assert "[(0, 2), (2, 4)]" in done.stdout


_ELSEWHERE = """
import json, sys, numpy as np, ember as em
from ember.kernels import background, parallel, thread_pool
from ember.kernels.numba_loader import compile_source
em.set_num_threads(2); em.use_deterministic_algorithms(True)
kernel = compile_source(sys.argv[1], "scaled")
x, counts = np.arange(22.0).reshape(11, 2), np.zeros(1, np.int64)
args = (x, counts, 0.5, True, 2)
runs = []
for elsewhere in (True, False):
    background.compiling_elsewhere(elsewhere)
    # the first split hands the entry points to the compiler thread (compiled there, or loaded from disk) unless
    # they are neither in memory nor on disk while that process runs
    parallel.run_kernel(kernel, [(0, 5), (5, 11)], args + (np.zeros(11),), (np.zeros((2, 2), np.int64),))
    background.wait()
    out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
    parallel.run_kernel(kernel, [(0, 5), (5, 11)], args + (out,), (scratch,))
    kinds = thread_pool._kinds(args + (out,), (scratch,))
    task = thread_pool._entries[kinds][0]
    runs.append([out.tolist(), scratch.tolist(), task._wrapper_address is not None,
                 (id(kernel), kinds) in thread_pool._chunks])
print(json.dumps(runs))
"""

_WANTED = """
import json, sys, numpy as np, ember as em
from ember.kernels import background, parallel, thread_pool
from ember.kernels.numba_loader import compile_source
em.set_num_threads(2); em.use_deterministic_algorithms(True)
kernel = compile_source(sys.argv[1], "scaled")
x, counts = np.arange(22.0).reshape(11, 2), np.zeros(1, np.int64)
background.compiling_elsewhere(True)
out, scratch = np.zeros(11), np.zeros((2, 2), np.int64)
args = (x, counts, 0.5, True, 2, out)
parallel.run_kernel(kernel, [(0, 5), (5, 11)], args, (scratch,))  # without entry points: registered as wanted
kinds = thread_pool._kinds(args, (scratch,))
before = (id(kernel), kinds) in thread_pool._chunks
built, again = thread_pool.compile_wanted_entry_points(), thread_pool.compile_wanted_entry_points()
out[:], scratch[:] = 0, 0
parallel.run_kernel(kernel, [(0, 5), (5, 11)], args, (scratch,))
print(json.dumps([before, built, again, (id(kernel), kinds) in thread_pool._chunks, out.tolist(), scratch.tolist()]))
"""


def test_entry_points_run_without_while_another_process_compiles_the_step_can_be_compiled_here_newest_first(
        tmp_path):
    # what ahead.py's parent does while it waits for a kernel the child is compiling: the entry points it has run
    # without compile here, and the next split runs on them
    if not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    done = subprocess.run([sys.executable, "-c", _WANTED, _SOURCE], env=dict(os.environ, EMBER_CACHE=str(tmp_path)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    want = (np.arange(0.0, 22.0, 2) * 0.5 + 2).tolist()
    assert json.loads(done.stdout) == [False, True, False, True, want, [[0, 5], [5, 11]]]


def test_while_another_process_compiles_the_step_chunks_run_without_entry_points_until_they_are_on_disk(tmp_path):
    # ahead.py's parent: a split kernel whose entry points are neither in memory nor on disk runs its chunks through
    # the kernel's own compiled code, compiling no entry point; once they are on disk (or, that process gone), the
    # compiler thread loads (or compiles) them and the next split runs them
    if not thread_pool.native_available():
        pytest.skip("no GIL-free workers on this platform")
    want = (np.arange(0.0, 22.0, 2) * 0.5 + 2).tolist()
    env = dict(os.environ, EMBER_CACHE=str(tmp_path))
    expected = ([[want, [[0, 5], [5, 11]], False, False], [want, [[0, 5], [5, 11]], True, True]],  # empty cache
                [[want, [[0, 5], [5, 11]], True, True]] * 2)  # the entry points on disk: loaded
    for runs in expected:
        done = subprocess.run([sys.executable, "-c", _ELSEWHERE, _SOURCE], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [list(r) for r in runs]
