"""Split a convolution's batch over threads that each run single-threaded BLAS.

im2col is a serial copy, and BLAS parallelises a GEMM with a skinny dimension (16 output channels, 144
patch rows) poorly, so splitting the batch itself keeps every core busy through both; PyTorch's
im2col convolution (slow_conv2d) parallelises over the batch in the same way. NumPy releases the
GIL in matmul and the compiled kernels are `nogil`, so plain threads run in parallel (handoff_pool.py
hands the chunks over; run_kernel gives a compiled kernel's chunks to native_pool.py's workers, which never take
the GIL). During the split, NumPy's OpenBLAS runs one thread per call (it would otherwise
start its own threads inside each call and oversubscribe the cores); its thread count is restored afterwards. Where NumPy's BLAS
cannot be told that (another BLAS, or none found), or with one core, nothing is split.
EMBER_CONV_THREADS=N sets the number of threads (1 turns the split off).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ember.ops import native_pool, spin_wait
from ember.ops.handoff_pool import HandoffPool

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")

_lock = threading.Lock()
_state: dict = {}
_local = threading.local()


def _openblas_libraries():
    """NumPy's bundled OpenBLAS libraries, loaded (a wheel bundles one; none when NumPy uses another BLAS)."""
    found = []
    for path in glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            continue
    return found


def _blas_controls():
    """(get, set) for NumPy's bundled OpenBLAS thread count, or None."""
    for lib in _openblas_libraries():
        for get_name, set_name in zip(_GETTERS, _SETTERS):
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                getter, setter = getattr(lib, get_name), getattr(lib, set_name)
                getter.restype = ctypes.c_int
                setter.argtypes = [ctypes.c_int]
                return getter, setter
    return None


# After a multithreaded GEMM, OpenBLAS's idle threads spin (yielding) for 2^28 cycles, about 0.1 s, before they
# sleep. A split that follows a GEMM (attention after its projections, GELU after fc1, a convolution's
# backward after the classifier's) then shares its second core with a spinning thread: attention and GELU ran
# 1.5-2x slower in a transformer step than alone. 2^19 cycles (about 0.2 ms) still covers the gaps between
# the GEMMs of an LSTM's time loop, whose threads must stay awake (2^16 made that step 14% slower); measured
# in one process, a transformer step went from 32.5 to 28.5 ms, the LSTM's, MLPs' and CNNs' did not change.
SPIN_CYCLES_LOG2 = 19


def shorten_blas_spin(log2_cycles: int = SPIN_CYCLES_LOG2) -> bool:
    """Make NumPy's OpenBLAS threads sleep after 2**log2_cycles idle cycles (OPENBLAS_THREAD_TIMEOUT), unless
    the user set OPENBLAS_THREAD_TIMEOUT; True if applied. OpenBLAS reads the setting when it starts its
    threads, so they are stopped here and start again at the next threaded call: call it while no thread
    is inside BLAS (Ember calls it on import)."""
    if os.environ.get("OPENBLAS_THREAD_TIMEOUT", str(log2_cycles)) != str(log2_cycles):
        return False
    for lib in _openblas_libraries():
        if hasattr(lib, "openblas_read_env") and hasattr(lib, "blas_thread_shutdown_"):
            # left set: child processes start their OpenBLAS with it, and so does this one's next threaded call
            os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(log2_cycles)
            lib.openblas_read_env()
            lib.blas_thread_shutdown_()
            return True
    return False


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def workers() -> int:
    """How many threads a batch is split over (1: not split)."""
    if _state.get("pid") != os.getpid():  # first use, or a forked child: the parent's pool threads are gone
        with _lock:
            if _state.get("pid") != os.getpid():
                controls = _blas_controls()
                n = min(_cores(), 8) if controls is not None else 1
                env = os.environ.get("EMBER_CONV_THREADS", "").strip()
                if env:
                    if not env.isdigit() or int(env) < 1:
                        raise ValueError(f"EMBER_CONV_THREADS must be a positive integer, got {env!r}")
                    n = int(env) if controls is not None else 1
                _state["controls"] = controls
                _state["pool"] = _make_pool(n - 1) if n > 1 else None
                _state["native"] = _make_native_pool(n - 1) if n > 1 else None
                _state["workers"] = n
                _state["active"] = 0
                _state["pid"] = os.getpid()
    return _state["workers"]


def _make_pool(n: int):
    """n helper threads: a HandoffPool where Numba can poll for the hand-offs, else a ThreadPoolExecutor."""
    from ember.graph.codegen import get_backend

    found = spin_wait.waiter() if get_backend() != "numpy" else None
    if found is None:
        return ThreadPoolExecutor(n, thread_name_prefix="ember-batch")
    return HandoffPool(n, *found)


def _make_native_pool(n: int):
    """n GIL-free helper threads for compiled kernels (native_pool.py), or None where they cannot run."""
    from ember.graph.codegen import get_backend

    found = spin_wait.waiter() if get_backend() != "numpy" else None
    return native_pool.make(n, found[1]) if found is not None else None


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of `parts` near-equal chunks of range(n), none empty."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts)]


# Below this a split's hand-off to the pool thread and back (30-60 us with a ThreadPoolExecutor; 11 us with
# HandoffPool when measured, where 3 MFLOP measured no different within this VM's noise; 31-33 us for an empty
# split on 2026-11-27, mostly the worker's wait for the GIL: handoff_pool.py) outweighs the second core; such a
# call still runs with one BLAS thread, so OpenBLAS's own threads are not woken between splits.
# 10 MFLOP splits LeNet-5's second convolution (31 MFLOP, 0.7 ms, mostly im2col): its training step went
# from 7.3 to 6.0 ms in one process (40 MFLOP had measured better only while OpenBLAS's threads spun).
_MIN_FLOPS = 10e6


def run(fn, n: int, flops: float = float("inf")) -> list:
    """fn(start, stop) for chunks of a batch of n costing `flops` in all, concurrently; results in chunk order."""
    return _run_chunks(fn, chunks(n, flops))


def chunks(n: int, flops: float = float("inf")) -> list[tuple[int, int]]:
    """The [start, stop) chunks run() and run_kernel() split a batch of n costing `flops` into (one below _MIN_FLOPS)."""
    return split(n, workers()) if flops >= _MIN_FLOPS else [(0, n)]


def _run_chunks(fn, parts: list) -> list:
    if workers() == 1:
        return [fn(*parts[0])] if len(parts) == 1 else [fn(a, b) for a, b in parts]
    _enter()
    try:
        pool = _state["pool"]
        native = _state["native"]
        if native is not None and len(parts) > 1:  # its idle workers would take the cores these chunks need
            native.quiet()
        if type(pool) is HandoffPool:
            return pool.run([lambda a=a, b=b: fn(a, b) for a, b in parts])
        futures = [pool.submit(fn, a, b) for a, b in parts[1:]]  # none for one chunk
        first = fn(*parts[0])
        return [first] + [f.result() for f in futures]
    finally:
        _leave()


# On the native pool a split costs a few microseconds rather than 30: a direct convolution gains from about 3 MFLOP
# ((4, 16, 16, 16) by 16 3x3 filters, 4.7 MFLOP: 43 -> 36 us; 2.4 MFLOP even; 0.6 MFLOP 9% slower), 2026-11-27.
_MIN_NATIVE_FLOPS = 3e6


def native() -> bool:
    """Whether run_kernel's splits go to the GIL-free native pool, where a split costs a few microseconds."""
    return workers() > 1 and _state["native"] is not None


def kernel_chunks(n: int, flops: float) -> list[tuple[int, int]]:
    """chunks() for run_kernel: a split pays from _MIN_NATIVE_FLOPS on the native pool, else from _MIN_FLOPS."""
    if not native():
        return chunks(n, flops)
    return split(n, workers()) if flops >= _MIN_NATIVE_FLOPS else [(0, n)]


def chunks_if(n: int, split: bool) -> list[tuple[int, int]]:
    """chunks() for kernels that judge by their own size rule rather than FLOPs: split when `split`, else one."""
    return chunks(n, float("inf") if split else 0.0)


_bounds: dict = {}  # run_kernel's chunks as the (parts, 2) array the native pool takes, by chunks
_MAX_BOUNDS = 1024


def run_kernel(kernel, parts: list, head: tuple, parted: tuple = (), strided: bool = False) -> None:
    """kernel(*head, *(p[k] for p in parted), start, stop) for each chunk k, [start, stop) = parts[k] (from
    chunks()), concurrently; on the GIL-free native pool (native_pool.py) where it can carry the arguments.
    `kernel` is a compiled (Numba) function; each array in `parted` has a row per chunk (its own scratch);
    `strided`: see NativePool.try_run."""
    native = _state["native"] if workers() > 1 else None
    if native is not None:
        bounds = _bounds.get(tuple(parts))
        if bounds is None:
            if len(_bounds) >= _MAX_BOUNDS:  # a workload of ever new sizes: start again rather than grow
                _bounds.clear()
            bounds = _bounds[tuple(parts)] = np.array(parts, np.int64).reshape(-1, 2)
        if len(parts) == 1:
            if native.try_run(kernel, head, parted, bounds, strided):
                return
        elif not _state["active"]:  # inside another split (a Python chunk's kernel) its threads already fill the cores
            _enter()
            try:
                if native.try_run(kernel, head, parted, bounds, strided):
                    return
            finally:
                _leave()
    row = {start: k for k, (start, _) in enumerate(parts)}
    _run_chunks(lambda a, b: kernel(*head, *(p[row[a]] for p in parted), a, b), parts)


def worth_splitting(flops: float) -> bool:
    """Whether a kernel of `flops` should split itself over the threads now: there are several, it is large
    enough, and no split is under way (its threads are busy; a split inside one runs on the caller's thread)."""
    return workers() > 1 and flops >= _MIN_FLOPS and not _state["active"]


def run_if(fn, n: int, split: bool) -> list:
    """run() for kernels that judge by their own size rule rather than FLOPs: split when `split`, else one chunk."""
    return run(fn, n, float("inf") if split else 0.0)


def _enter() -> None:
    # The first of any concurrent splits (the engine may run two convolutions at once) saves BLAS's
    # thread count and sets one; the last to leave restores it.
    with _lock:
        if _state["active"] == 0:
            get, set_threads = _state["controls"]
            _state["saved"] = get()
            set_threads(1)
        _state["active"] += 1


def _leave() -> None:
    with _lock:
        _state["active"] -= 1
        if _state["active"] == 0:
            _state["controls"][1](_state["saved"])


def workspace(size: int, dtype) -> np.ndarray:
    """A flat scratch array of `size` values for the calling thread, reused by its next call (so its pages
    are not faulted in again); it must not outlive the caller's use of it."""
    buf = getattr(_local, "buf", None)
    dtype = np.dtype(dtype)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = _local.buf = np.empty(size, dtype)
    return buf[:size]
