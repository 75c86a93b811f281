"""parallel_for and the thread settings: chunks cover the range in order, a split needs enough work per chunk,
BLAS runs one thread inside a split and gets its count back, errors reach the caller, set_num_threads sets the
pool and BLAS as torch.set_num_threads does, and `import ember` leaves the process as it found it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from ember.kernels import blas, parallel


def test_split_covers_the_range_in_order():
    for n in range(1, 30):
        for parts in range(1, 6):
            chunks = parallel.split(n, parts)
            assert chunks[0][0] == 0 and chunks[-1][1] == n and len(chunks) == min(n, parts)
            assert all(a < b and b == c for (a, b), (c, _) in zip(chunks, chunks[1:] + [(n, None)]))


def test_a_chunk_must_carry_enough_work_and_enough_items(two_threads):
    least = parallel.THRESHOLDS["min_python_chunk_flops"]
    assert parallel.chunks(9, flops=least / 2) == [(0, 9)]
    assert parallel.chunks(9, flops=least * 1.5) == [(0, 4), (4, 9)]
    assert parallel.chunks(9, flops=least * 100) == [(0, 4), (4, 9)]  # never more chunks than threads
    assert parallel.chunks(9, grain=5) == [(0, 9)]  # two chunks of at least 5 items do not fit in 9
    assert parallel.chunks(1) == [(0, 1)]


def test_compiled_chunks_carry_less_work_and_a_kernel_may_say_how_much(two_threads):
    """A compiled kernel's chunks split from min_kernel_chunk_flops, and from `least` where the kernel gives its own
    (a depthwise convolution's flops run slower than a GEMM's); Python chunks keep their own threshold."""
    kernel, python = parallel.THRESHOLDS["min_kernel_chunk_flops"], parallel.THRESHOLDS["min_python_chunk_flops"]
    assert kernel < python
    if not parallel.native():
        pytest.skip("compiled chunks run as Python tasks here")
    assert parallel.chunks(9, flops=kernel * 1.5, compiled=True) == [(0, 4), (4, 9)]
    assert parallel.chunks(9, flops=kernel * 1.5) == [(0, 9)]
    assert parallel.chunks(9, flops=kernel / 2, compiled=True) == [(0, 9)]
    assert parallel.chunks(9, flops=kernel / 2, compiled=True, least=kernel / 4) == [(0, 4), (4, 9)]
    assert parallel.chunks(9, flops=kernel / 2, least=kernel / 4) == [(0, 9)]  # Python chunks: `least` is not theirs


def test_concurrent_splits_each_get_their_chunks_and_blas_runs_one_thread_inside(split_everything):
    before = blas.get_threads()
    seen, errors = [], []

    def work(a, b):
        seen.append(blas.get_threads())
        return a, b

    def caller():
        try:
            for _ in range(50):
                assert parallel.parallel_for(9, work) == parallel.split(9, 2)
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(seen) == {1}
    assert blas.get_threads() == before


def test_an_error_in_a_chunk_reaches_the_caller_and_the_pool_is_free_again(split_everything):
    def work(a, b):
        if a:
            raise ValueError(f"chunk {a}..{b}")
        return b - a

    with pytest.raises(ValueError, match="chunk 3..6"):
        parallel.parallel_for(6, work)
    assert parallel.parallel_for(6, lambda a, b: b - a) == [3, 3]


def test_a_small_range_runs_in_the_caller_with_blas_untouched(two_threads):
    before = blas.get_threads()
    seen = []
    assert parallel.parallel_for(9, lambda a, b: seen.append(blas.get_threads()) or b - a, flops=1.0) == [9]
    assert seen == [before]


def test_set_num_threads_sizes_the_pool_and_blas_as_torch_does(two_threads):
    parallel.set_num_threads(1)
    assert parallel.get_num_threads() == 1 and blas.get_threads() == 1
    assert parallel.parallel_for(8, lambda a, b: (a, b)) == [(0, 8)]
    parallel.set_num_threads(2)
    assert parallel.get_num_threads() == 2 and blas.get_threads() == 2
    assert parallel.parallel_for(8, lambda a, b: threading.current_thread().name)[1] == "ember-worker-0"
    with pytest.raises(ValueError, match="set_num_threads: expected a positive int, got 0"):
        parallel.set_num_threads(0)


def test_ember_set_num_threads_is_the_intra_op_setting_and_interop_the_engines():
    import ember as em

    assert em.set_num_threads is parallel.set_num_threads and em.get_num_threads is parallel.get_num_threads
    before = em.get_num_interop_threads()
    em.set_num_interop_threads(3)
    try:
        assert em.get_num_interop_threads() == 3
    finally:
        em.set_num_interop_threads(before)


def _run(code: str, **env) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("EMBER_", "OPENBLAS_THREAD_TIMEOUT"))}
    full.update(env)
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_ember_num_threads_sets_the_split_and_a_bad_value_is_named():
    code = "from ember.kernels import parallel, blas; print(parallel.get_num_threads(), blas.get_threads())"
    assert _run(code, EMBER_NUM_THREADS="1").split() == ["1", "1"] or not blas.controllable()
    full = dict(os.environ, EMBER_NUM_THREADS="two")
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert "EMBER_NUM_THREADS='two': expected a positive integer" in done.stderr


_STATE = """
import ctypes, os, numpy as np
from ember.kernels import blas
def state():
    return (dict(os.environ), blas.get_threads(), tuple(t.name for t in __import__('threading').enumerate()))
a = np.ones((300, 300), np.float32)
a @ a
before = state()
import ember as em
x = em.randn(64, 64, requires_grad=True)
(x @ x).sum().backward()
after = state()
print(before == after)
"""


def test_import_and_eager_use_leave_environment_blas_and_threads_as_they_were():
    assert _run(_STATE) == "True"


_POOL_START = """
import os
from ember.kernels import blas, parallel
calls = []
real = blas.shorten_spin
blas.shorten_spin = lambda **kw: calls.append(kw) or real(**kw)
started = parallel._pool() is not None and parallel._pool() is not None
timeout = blas._openblas_libraries()[0].openblas_thread_timeout()
print(started, calls, timeout, os.environ.get('OPENBLAS_THREAD_TIMEOUT'))
"""


def test_the_pool_has_openblas_threads_sleep_soon_as_it_starts_leaving_the_environment():
    """Ember's pool, as it starts (once), has NumPy's OpenBLAS threads sleep after 2^19 idle cycles instead of
    spinning 0.1 s on the cores its workers need; the environment stays as it was, and a user's
    OPENBLAS_THREAD_TIMEOUT holds."""
    if not blas.controllable():
        pytest.skip("NumPy's BLAS is not a bundled OpenBLAS")
    env = dict(EMBER_NUM_THREADS="2", EMBER_COMPILE_IN_BACKGROUND="0")
    assert _run(_POOL_START, **env).split(maxsplit=1) == ["True", f"[{{'for_children': False}}] {blas.SPIN_CYCLES_LOG2} None"]
    assert _run(_POOL_START, OPENBLAS_THREAD_TIMEOUT="25", **env).split(maxsplit=1) == [
        "True", "[{'for_children': False}] 25 25"]


def test_tune_process_shortens_openblas_spin_unless_the_user_set_it():
    if not blas.controllable():
        pytest.skip("NumPy's BLAS is not a bundled OpenBLAS")
    code = ("import os, ember.kernels as k; applied = k.tune_process(); "
            "print(applied['blas_spin'], os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")
    assert _run(code).split() == ["True", str(blas.SPIN_CYCLES_LOG2)]
    assert _run(code, OPENBLAS_THREAD_TIMEOUT="25").split() == ["False", "25"]
