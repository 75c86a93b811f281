"""HandoffPool (batch_threads' workers, polling without the GIL): results in order, errors raised in the caller,
workers that slept or run long, nested and concurrent splits, and a process that forks or exits while they poll."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ember.ops import batch_threads, handoff_pool, spin_wait

pytest.importorskip("numba")


@pytest.fixture
def pool():
    found = spin_wait.waiter()
    assert found is not None
    return handoff_pool.HandoffPool(2, *found)


def _worker_name():
    return threading.current_thread().name


def test_results_come_back_in_order_and_run_on_the_workers(pool):
    for _ in range(50):
        assert pool.run([lambda k=k: k * k for k in range(3)]) == [0, 1, 4]
    names = pool.run([_worker_name] * 3)
    assert names[0] == threading.current_thread().name
    assert sorted(names[1:]) == ["ember-batch-0", "ember-batch-1"]


def test_chunks_run_at_the_same_time(pool):
    barrier = threading.Barrier(3, timeout=10)  # passes only if all three chunks are running at once
    assert pool.run([barrier.wait] * 3) is not None


def test_workers_that_went_to_sleep_are_woken(pool):
    deadline = time.monotonic() + 10  # past the idle poll (longer in wall time on a loaded machine) they sleep
    while pool._sleeping != [True, True] and time.monotonic() < deadline:
        time.sleep(0.005)
    assert pool._sleeping == [True, True]
    assert pool.run([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]


def test_the_caller_sleeps_through_a_long_chunk(pool):
    long_chunk = 3 * handoff_pool.RESULT_POLL_US * 1e-6
    assert pool.run([lambda: "caller", lambda: time.sleep(long_chunk) or "worker"]) == ["caller", "worker"]


def test_an_error_in_any_chunk_is_raised_in_the_caller_after_all_chunks_finish(pool):
    finished = []

    def slow():
        time.sleep(0.01)
        finished.append(True)

    def fail():
        raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        pool.run([lambda: None, fail, slow])
    assert finished == [True]
    with pytest.raises(ValueError, match="chunk failed"):
        pool.run([fail, slow, lambda: None])
    assert finished == [True, True]
    assert pool._tasks == [None, None] and pool._results == [None, None]  # the failed split's chunks are let go
    assert pool.run([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]  # still serving


def test_nested_and_concurrent_splits_run_inline(pool):
    inner = pool.run([lambda: pool.run([lambda: "a", lambda: "b"]), lambda: "c"])
    assert inner == [["a", "b"], "c"]
    results = []

    def split_from_a_thread(k):
        results.append(pool.run([lambda: k, lambda: -k]))

    threads = [threading.Thread(target=split_from_a_thread, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == sorted([k, -k] for k in range(1, 5))


def test_more_chunks_than_workers_run_inline(pool):
    assert pool.run([lambda k=k: k for k in range(5)]) == [0, 1, 2, 3, 4]


def test_batch_threads_run_splits_through_the_pool():
    if batch_threads.workers() < 2:
        pytest.skip("one core")
    assert type(batch_threads._state["pool"]) is handoff_pool.HandoffPool
    out = np.zeros(10)

    def fill(a, b):
        out[a:b] = np.arange(a, b)
        return a, b

    assert batch_threads.run(fill, 10) == batch_threads.split(10, batch_threads.workers())
    np.testing.assert_array_equal(out, np.arange(10))


_CHILD = """
import os, sys, numpy as np
from ember.ops import batch_threads
batch_threads.run(lambda a, b: None, 4)
pid = os.fork() if sys.argv[1] == "fork" else 0
if pid == 0:
    print(batch_threads.run(lambda a, b: (a, b), 4), flush=True)  # the child makes its own workers
    os._exit(0) if sys.argv[1] == "fork" else None
else:
    os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("how", ["exit", "fork"])
def test_a_process_forks_or_exits_while_workers_poll(how):
    if batch_threads.workers() < 2:
        pytest.skip("one core")
    env = {**os.environ, "EMBER_CONV_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", _CHILD, how], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "[(0, 2), (2, 4)]" in done.stdout
