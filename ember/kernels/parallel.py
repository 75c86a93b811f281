"""`parallel_for`: the one way Ember splits an op's work over threads, and the thread settings that govern it.

An op's kernel calls `parallel_for(n, fn, flops=...)` (Python chunks: NumPy and BLAS release the GIL) or
`run_kernel` (a compiled kernel's chunks, which run with no GIL at all), and the chunks go to the one worker
pool (thread_pool.py), the caller taking the first. As PyTorch's `at::parallel_for`, a range is split only where
each chunk carries enough work to repay its hand-off (`flops`: the whole range's cost; `grain`: the fewest items
a chunk may have), and a split inside a split runs its chunks in the caller. While a split runs, NumPy's BLAS
and MKL (mkl.py, where loaded) run one thread per call (they would otherwise start their own threads inside each
chunk and oversubscribe the cores) and their thread counts are restored afterwards.

`set_num_threads(n)` (as `torch.set_num_threads`) sets this pool's size (n - 1 workers beside the caller) and
BLAS's and MKL's thread counts; the default is EMBER_NUM_THREADS, else the cores this process may run on (at most 8).
The dependency engine's threads, which run independent ops at once, are the other setting,
`set_num_interop_threads` (ember.runtime.threads).
"""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from ember import config
from ember.kernels import blas, mkl, selection, thread_pool
from ember.kernels.thread_pool import Pool, run_ready_chunk

_lock = threading.Lock()
_state: dict = {}  # pid, threads, pool, active (splits under way), saved/saved_mkl (BLAS/MKL threads before them)
_local = threading.local()

# A chunk must carry this much work to repay its hand-off: on the GIL-free workers a hand-off costs a few
# microseconds, a Python task's (whose worker must take the GIL) 30-60 us. See THRESHOLDS.
THRESHOLDS = selection.Table(
    "parallel_for",
    measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27",
    values={
        "min_python_chunk_flops": (10e6, "a Python chunk (im2col + GEMM of a batch slice) repays its 30-60 us "
                                         "hand-off from this much work (LeNet-5's second convolution splits)"),
        "min_kernel_chunk_flops": (3e6, "a compiled kernel's chunk repays its few-microsecond hand-off from this "
                                        "much work ((4, 16, 16, 16) by 16 3x3 filters: 43 -> 36 us)"),
    })


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def get_num_threads() -> int:
    """How many threads one op's work is split over (the caller and the pool's workers), as torch.get_num_threads."""
    return _ready()["threads"]


def set_num_threads(n: int) -> None:
    """Split each op's work over `n` threads (n - 1 pool workers and the caller) and run BLAS on `n` threads, as
    torch.set_num_threads."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    config.NUM_THREADS.set(n)
    with _lock:
        old = _state.get("pool") if _state.get("pid") == os.getpid() else None
        _state.clear()
    if old is not None:
        old.close()
    blas.set_threads(n)
    mkl.set_threads(n)
    _ready()


def _ready() -> dict:
    """The pool state for this process, made on first use (or again in a forked child, whose parent's threads are
    gone)."""
    if _state.get("pid") != os.getpid():
        with _lock:
            if _state.get("pid") != os.getpid():
                n = config.NUM_THREADS.get() or min(cores(), 8)
                if not blas.controllable():
                    n = 1  # chunks calling a BLAS that cannot be held to one thread would oversubscribe the cores
                elif config.NUM_THREADS.get():
                    blas.set_threads(n)  # a thread count the user chose holds for BLAS too
                _state.update(threads=n, pool=None, active=0, saved=None, pid=os.getpid())
    return _state


def _pool() -> Pool | None:
    state = _ready()
    if state["pool"] is None and state["threads"] > 1:
        if not thread_pool.loops_ready():  # compiling in the background: this call runs in the caller alone
            return None
        with _lock:
            if state["pool"] is None:
                # After each threaded GEMM, NumPy's OpenBLAS threads spin 0.1 s (blas.py), on the cores this pool's
                # workers then wait for: in a script that never calls tune_process, ResNet-18's batch-1 forward ran
                # at 1.5-2.1x PyTorch's time instead of 0.9-1.05, ResNet-20's step at 1.5-1.6x instead of 0.8-1.05
                # (eager and jit; a Zen 3, 2 threads, 2026-12-04). The pool owns those cores, so as it starts it has
                # BLAS's threads sleep after 0.2 ms, as tune_process does (unless OPENBLAS_THREAD_TIMEOUT is set), the
                # environment kept.
                blas.shorten_spin(for_children=False)
                state["pool"] = Pool(state["threads"] - 1)
    return state["pool"]


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of `parts` near-equal chunks of range(n), none empty."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts)]


def chunks(n: int, flops: float = float("inf"), grain: int = 1, compiled: bool = False,
           least: float | None = None) -> list[tuple[int, int]]:
    """The [start, stop) chunks a range of n items costing `flops` in all is split into: as many as there are
    threads, but none with fewer than `grain` items or less work than a chunk must carry (a compiled kernel's
    chunks, `compiled`, repay their hand-off from less work than Python's; `least` overrides that amount for a
    kernel whose flops run slower than a GEMM's, so that a chunk of fewer of them repays its hand-off)."""
    threads = get_num_threads()
    if threads == 1 or n < 2 or flops < min(_least_chunk_flops(), least if compiled and least is not None else 1e300):
        return [(0, n)]  # (decided without starting the pool: it starts only for work it will take)
    if least is None or not (compiled and native()):
        least = THRESHOLDS["min_kernel_chunk_flops" if compiled and native() else "min_python_chunk_flops"]
    if flops < least:
        return [(0, n)]
    by_work = threads if flops == float("inf") or least <= 0 else -(-flops // least)  # chunks of `least` or more
    return split(n, int(max(1, min(threads, n // max(grain, 1), by_work))))


def _least_chunk_flops() -> float:
    """The least work any chunk repays its hand-off with: below it nothing splits, whichever the pool's kind."""
    return min(THRESHOLDS["min_kernel_chunk_flops"], THRESHOLDS["min_python_chunk_flops"])


def parallel_for(n: int, fn, flops: float = float("inf"), grain: int = 1) -> list:
    """fn(start, stop) over chunks of range(n) (see `chunks`), concurrently; the results in chunk order."""
    return run_chunks(fn, chunks(n, flops, grain))


def run_chunks(fn, parts: list) -> list:
    """fn(start, stop) for each [start, stop) of `parts`, concurrently (the caller takes the first); results in order."""
    if len(parts) == 1:
        return [fn(*parts[0])]
    pool = _pool()
    if pool is None:
        return [fn(a, b) for a, b in parts]
    _enter()
    try:
        return pool.run([lambda a=a, b=b: fn(a, b) for a, b in parts])
    finally:
        _leave()


def native() -> bool:
    """Whether compiled kernels' chunks run on GIL-free workers here (several threads, Numba, Linux)."""
    pool = _pool()
    return pool is not None and pool.native


def splitting_now() -> bool:
    """Whether a split is under way in this process (its threads are busy: a kernel should not split again)."""
    return bool(_ready()["active"])


def worth_splitting(flops: float, compiled: bool = False) -> bool:
    """Whether a kernel of `flops` should split itself over the threads now: there are several, it is large
    enough (for `compiled` chunks on GIL-free workers, as `chunks` has it), and no split is under way."""
    if get_num_threads() == 1 or splitting_now() or flops < _least_chunk_flops():
        return False  # (decided without starting the pool)
    return flops >= THRESHOLDS["min_kernel_chunk_flops" if compiled and native() else "min_python_chunk_flops"]


_bounds: dict = {}  # run_kernel's chunks as the (parts, 2) array the pool takes, by chunks
_MAX_BOUNDS = 1024


def run_kernel(kernel, parts: list, head: tuple, parted: tuple = (), strided: bool = False) -> None:
    """kernel(*head, *(p[k] for p in parted), start, stop) for each chunk k, [start, stop) = parts[k] (from
    chunks()), concurrently: on GIL-free workers where the pool can carry the arguments, else as Python tasks.
    `kernel` is a compiled (Numba) function; each array in `parted` has a row per chunk (its own scratch);
    `strided`: see Pool.try_run_kernel."""
    pool = _pool()
    if pool is not None and pool.native:
        if len(parts) == 1 and run_ready_chunk(kernel, head, parted, parts[0][0], parts[0][1], strided):
            return
        bounds = _bounds.get(tuple(parts))
        if bounds is None:
            if len(_bounds) >= _MAX_BOUNDS:  # a workload of ever new sizes: start again rather than grow
                _bounds.clear()
            bounds = _bounds[tuple(parts)] = np.array(parts, np.int64).reshape(-1, 2)
        # one chunk: the launcher unpacks the arguments in compiled code, cheaper than a Python call. Several: not
        # inside a Python chunk's split, whose threads already fill the cores. A compiled chunk calls no BLAS (the
        # kernels' products run on the GEMM micro-kernel), so BLAS's thread count is left as it is (saving and
        # restoring it cost 2 us a split); a split of another thread meanwhile finds the pool busy and runs in
        # its caller.
        if (len(parts) == 1 or not _state["active"]) and pool.try_run_kernel(kernel, head, parted, bounds, strided):
            return
    row = {start: k for k, (start, _) in enumerate(parts)}
    run_chunks(lambda a, b: kernel(*head, *(p[row[a]] for p in parted), a, b), parts)


def _enter(blas_threads: int = 1) -> None:
    # The first of any concurrent splits (the engine may run two convolutions at once) saves BLAS's and MKL's
    # thread counts and sets them to `blas_threads`; the last to leave restores them. (MKL loaded inside the split
    # takes one thread itself, and the pool's count when the split ends.)
    with _lock:
        if _state["active"] == 0:
            _state["saved"] = blas.get_threads()
            _state["saved_mkl"] = mkl.get_threads()
            blas.set_threads(blas_threads)
            mkl.set_threads(blas_threads)
        _state["active"] += 1


@contextlib.contextmanager
def one_core_fewer():
    """While it lasts, BLAS runs on one thread fewer and compiled kernels do not split (as inside a split): for
    ops that run while the background compiler holds a core, so that BLAS's threads do not wait on each other."""
    _ready()
    _enter(max(1, get_num_threads() - 1))
    try:
        yield
    finally:
        _leave()


def _leave() -> None:
    with _lock:
        _state["active"] -= 1
        if _state["active"] == 0:
            if _state["saved"] is not None:
                blas.set_threads(_state["saved"])
            mkl.set_threads(_state.get("saved_mkl") or _state["threads"])


def workspace(size: int, dtype) -> np.ndarray:
    """A flat scratch array of `size` values for the calling thread, reused by its next call (so its pages
    are not faulted in again); it must not outlive the caller's use of it."""
    buf = getattr(_local, "buf", None)
    dtype = np.dtype(dtype)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = _local.buf = np.empty(size, dtype)
    return buf[:size]
