"""A batch split whose helper threads never take the GIL: compiled worker loops call each chunk's kernel
through a C entry point (a Numba cfunc) given the address of an argument block the caller filled.

HandoffPool's workers run each chunk's Python, so each must take the GIL, which the caller holds until its
own chunk enters compiled code: the worker sleeps on the GIL and the kernel wakes it, 31-33 us a split on
this project's VM and about 90 us in its slow spells, 100 times in a ResNet-20 training step. Here a split
is one compiled call: it writes the chunks' block addresses into the workers' control rows, raises their
`posted` counters, runs chunk 0 itself and waits for the workers' `done` counters; an empty split costs about
a microsecond. The counters are polled (yielding the core between polls) and, past a budget, slept on with
a futex, so an idle worker costs nothing. A split on HandoffPool's threads first quiets them (quiet()): they
sleep at once instead of polling beside its threads on the same cores.

A kernel runs here when every argument is an aligned array in the machine's byte order (any strides), a bool,
an int or a float, and its last two arguments are the chunk's [start, stop). Per (kernel, argument kinds) a
cfunc is generated that rebuilds the arrays from the block (carray, as_strided for a strided one) and calls the
kernel, with a compiled launcher that fills the blocks; both are compiled once and cached on disk like the
kernels. Where a kernel raises, its cfunc's wrapper prints the exception and returns 0 (a C entry point cannot
pass it on), and the caller runs the split again on Python threads, where the exception reaches it. Linux only (the futex); elsewhere, or without
Numba, batch_threads uses HandoffPool.
"""

from __future__ import annotations

import os
import platform
import sys
import threading

import numpy as np

IDLE_POLL_US = 300  # how long an idle worker polls for the next chunk before it sleeps on its futex
RESULT_POLL_US = 2000  # how long the caller polls for the workers' chunks before it sleeps
_FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98}.get(platform.machine())

_LOOPS = '''
from numba import njit

from ember.ops.thread_intrinsics import call_task, futex, load, sched_yield, store


# a worker's control row: counters, the posted chunk, and whether its task failed; two cache lines
POSTED, DONE, FN, ARG, STOP, WORKER_ASLEEP, CALLER_ASLEEP, QUIET, FAILED, ROW = 0, 1, 2, 3, 4, 5, 6, 7, 8, 16
FUTEX_WAIT, FUTEX_WAKE = 128, 129  # the process-private forms


@njit(nogil=True, cache=True)
def _wait(ctl, i, value, asleep, polls, futex_nr, quiet):
    # until ctl[i] >= value: `polls` polls (fewer once ctl[quiet] is raised, quiet >= 0), then sleeps on the futex
    # with ctl[asleep] raised for the waker
    for _ in range(polls):
        if load(ctl, i) >= value:
            return
        if quiet >= 0 and load(ctl, quiet):
            break
        sched_yield()
    while True:
        store(ctl, asleep, 1)
        now = load(ctl, i)
        if now >= value:
            break
        futex(futex_nr, ctl, i, FUTEX_WAIT, now & 0xFFFFFFFF)
    store(ctl, asleep, 0)


@njit(nogil=True, cache=True)
def _raise(ctl, i, value, asleep, futex_nr):
    # ctl[i] = value, waking the thread that sleeps on it
    store(ctl, i, value)
    if load(ctl, asleep):
        futex(futex_nr, ctl, i, FUTEX_WAKE, 0x7FFFFFFF)


def serve(ctl, row, polls, futex_nr):
    # a worker: runs each chunk posted to control row `row` until STOP is raised
    base = row * ROW
    seen = 0
    while True:
        seen += 1
        _wait(ctl, base + POSTED, seen, base + WORKER_ASLEEP, polls, futex_nr, base + QUIET)
        if load(ctl, base + STOP):
            return
        if call_task(ctl[base + FN], ctl[base + ARG]) == 0:  # a task returns 1, or 0 where its kernel raised
            ctl[base + FAILED] = 1
        _raise(ctl, base + DONE, seen, base + CALLER_ASLEEP, futex_nr)


def split(ctl, fn, blocks, block_bytes, parts, polls, futex_nr):
    # fn's chunks 1..parts-1 on workers 0..parts-2 (chunk k's block at blocks + k * block_bytes), chunk 0 here: the
    # number of chunks whose kernel raised
    for w in range(parts - 1):
        base = w * ROW
        ctl[base + FN] = fn
        ctl[base + ARG] = blocks + (w + 1) * block_bytes
        store(ctl, base + QUIET, 0)
        _raise(ctl, base + POSTED, ctl[base + POSTED] + 1, base + WORKER_ASLEEP, futex_nr)
    failed = 1 if call_task(fn, blocks) == 0 else 0
    for w in range(parts - 1):
        base = w * ROW
        _wait(ctl, base + DONE, ctl[base + POSTED], base + CALLER_ASLEEP, polls, futex_nr, -1)
        failed += ctl[base + FAILED]
        ctl[base + FAILED] = 0
    return failed


def stop(ctl, workers, futex_nr):
    # every worker returns from serve
    for w in range(workers):
        base = w * ROW
        store(ctl, base + STOP, 1)
        _raise(ctl, base + POSTED, ctl[base + POSTED] + 1, base + WORKER_ASLEEP, futex_nr)
'''

# Per (kernel, argument kinds): `task`, a chunk's C entry point, rebuilds the kernel's arguments from an int64
# block (floats stored as their bits); `launch` fills one block per chunk from the arguments themselves (in
# compiled code: reading an address from Python costs a microsecond an array) and runs the split.
_CHUNK = '''
import sys

import numpy as np
from numba import carray, njit
from numpy.lib.stride_tricks import as_strided

from ember.ops.thread_intrinsics import address

kernel = sys.modules[{module!r}].{attr}
split = sys.modules[{loops!r}].jitted_split


def task(block):
    # 1; where the kernel raises, the cfunc's wrapper prints the exception and returns 0
    a = carray(address(block), {size}, np.int64)
    f = carray(address(block), {size}, np.float64)
    kernel({arguments})
    return 1


@njit(nogil=True, cache=True)
def launch(ctl, fn, chunks, polls, futex, {parameters}):
    # the number of chunks whose kernel raised
    parts = chunks.shape[0]
    block = np.empty((parts, {size}), np.int64)
    f = block.view(np.float64)
    for k in range(parts):
        a = block[k]
{packing}
        a[{size} - 2] = chunks[k, 0]
        a[{size} - 1] = chunks[k, 1]
    return split(ctl, fn, block.ctypes.data, {size} * 8, parts, polls, futex)
'''

_ROW_WORDS = 16  # _LOOPS' ROW
QUIET_SLOT = 7  # _LOOPS' QUIET
_LOOP_SIGNATURES = {"serve": "void(int64[::1], int64, int64, int64)",
                    "split": "int64(int64[::1], int64, int64, int64, int64, int64, int64)",
                    "stop": "void(int64[::1], int64, int64)"}


def available() -> bool:
    """Whether this platform can run a NativePool (Linux futexes on x86-64 or AArch64)."""
    return sys.platform.startswith("linux") and _FUTEX_SYSCALL is not None


def _plain(a: np.ndarray) -> bool:
    """Whether the block can carry `a`: aligned, in the machine's byte order."""
    return a.flags.aligned and a.dtype.isnative


def _kinds(head: tuple, parted: tuple, strided: bool = False):
    """The kinds of the arguments (an array's dtype character and dims, "p"-prefixed in parted, "s"-prefixed where
    not C-contiguous, or with `strided` wherever it has two dims or more; a scalar's "b", "i" or "f"), or None for
    one the block cannot carry (a misaligned or byte-swapped array, a strided parted one, a float32 scalar, an
    object)."""
    kinds = []
    for v in head:
        t = type(v)
        if t is np.ndarray:
            if not _plain(v):
                return None
            plain = v.flags.c_contiguous and not (strided and v.ndim > 1)
            kinds.append((v.dtype.char if plain else "s" + v.dtype.char, v.ndim))
        elif t is bool or t is np.bool_:
            kinds.append("b")
        elif t is int or t is np.int64:
            kinds.append("i")
        elif t is float or t is np.float64:
            kinds.append("f")
        else:
            return None
    for p in parted:
        if type(p) is not np.ndarray or not _plain(p) or not p.flags.c_contiguous:
            return None
        kinds.append(("p" + p.dtype.char, p.ndim))
    return tuple(kinds)


def _chunk_source(kernel, kinds) -> str:
    """_CHUNK for `kernel` and argument `kinds`: arrays as address then shape, a parted array as its row k's."""
    arguments, packing, parameters, at = [], [], [], 0
    for i, kind in enumerate(kinds):
        p = f"p{i}"
        parameters.append(p)
        if kind in ("b", "i", "f"):
            arguments.append({"b": f"a[{at}] != 0", "i": f"a[{at}]", "f": f"f[{at}]"}[kind])
            packing.append({"b": f"a[{at}] = 1 if {p} else 0", "i": f"a[{at}] = {p}", "f": f"f[k, {at}] = {p}"}[kind])
            at += 1
            continue
        code, ndim = kind
        skip = 1 if code[:-1] == "p" else 0  # a parted array's first dim is the chunk
        dims = range(skip, ndim)
        dtype = np.dtype(code[-1])
        name = "bool_" if dtype == np.bool_ else dtype.name
        shape = "".join(f"a[{at + 1 + d}], " for d in range(len(dims)))
        row = f" + k * {p}.strides[0]" if skip else ""
        packing.append(f"a[{at}] = {p}.ctypes.data{row}")
        packing += [f"a[{at + 1 + d}] = {p}.shape[{dim}]" for d, dim in enumerate(dims)]
        if code[:-1] == "s":  # strided: its strides (bytes) follow its shape, and it is a view of its first value
            strides = "".join(f"a[{at + 1 + ndim + d}], " for d in range(ndim))
            arguments.append(f"as_strided(carray(address(a[{at}]), (1,), np.{name}), ({shape}), ({strides}))")
            packing += [f"a[{at + 1 + ndim + d}] = {p}.strides[{d}]" for d in range(ndim)]
            at += 1 + 2 * ndim
            continue
        arguments.append(f"carray(address(a[{at}]), ({shape}), np.{name})")
        at += 1 + len(dims)
    arguments += [f"a[{at}]", f"a[{at + 1}]"]
    module = kernel.py_func.__module__
    attr = next(k for k, v in sys.modules[module].__dict__.items() if v is kernel)
    from ember.graph.codegen.cache import load_source

    return _CHUNK.format(module=module, attr=attr, loops=load_source(_LOOPS).__name__, size=at + 2,
                         arguments=", ".join(arguments), parameters=", ".join(parameters),
                         packing="\n".join(" " * 8 + line for line in packing))


_chunks: dict = {}
_chunks_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _chunks_lock
    _chunks_lock = threading.Lock()  # a thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _compiled(kernel, kinds):
    """(task address, launch) for `kernel` and argument `kinds`, compiled (or loaded from disk) once; None where
    that failed before."""
    key = (id(kernel), kinds)
    found = _chunks.get(key)
    if found is not None and found[0] is kernel:
        return None if found[1] is None else (found[1], found[2])
    from numba import types
    from numba.core.caching import NullCache
    from numba.core.ccallback import CFunc

    from ember.graph.codegen import cache
    from ember.graph.codegen.numba_cpu import numba_cache_path

    signature = ((types.int64,), types.int64)
    with _chunks_lock:
        module = cache.load_source(_chunk_source(kernel, kinds))
        task = CFunc(module.task, signature, locals={}, options={"error_model": "numpy"})
        # a kernel kept off the disk (it calls a ctypes function) keeps its callers off it too
        path = numba_cache_path(module) if not isinstance(kernel._cache, NullCache) else None
        if path is not None:
            task.enable_caching()
            if task._cache.cache_path != path:  # a locator picked another folder: never load from there
                task = CFunc(module.task, signature, locals={}, options={"error_model": "numpy"})
        task.compile()
        launch = module.launch
        if path is None or launch.stats.cache_path != path:
            launch.disable_caching()
        _chunks[key] = (kernel, task.address, launch, task)  # the CFunc keeps its code alive
    return task.address, launch


class NativePool:
    """`n` worker threads in compiled loops; try_run() splits a compiled kernel's range over them and the caller."""

    def __init__(self, n: int, polls_per_us: float) -> None:
        from ember.graph.codegen.numba_cpu import compiled_function

        # compiled here, for the argument types they are called with, so that a failure shows before any thread starts
        self._serve, self._split, self._stop = (compiled_function(_LOOPS, name, signature_or_function=signature)
                                                for name, signature in _LOOP_SIGNATURES.items())
        self.workers = n
        self._idle_polls = max(1, int(IDLE_POLL_US * polls_per_us))
        self._result_polls = max(1, int(RESULT_POLL_US * polls_per_us))
        raw = np.zeros(n * _ROW_WORDS + 8, np.int64)  # rows on their own cache lines: 64-byte aligned
        skip = (-raw.ctypes.data % 64) // 8
        self._ctl = raw[skip:skip + n * _ROW_WORDS]
        self._busy = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, args=(self._ctl, w, self._idle_polls, _FUTEX_SYSCALL),
                                          name=f"ember-native-{w}", daemon=True) for w in range(n)]
        for t in self._threads:
            t.start()

    def try_run(self, kernel, head: tuple, parted: tuple, chunks: np.ndarray, strided: bool = False) -> bool:
        """kernel(*head, *(p[k] for p in parted), start, stop) for each chunk k, [start, stop) = chunks[k], chunk 0
        in the caller; False (and nothing run) where the pool is busy or an argument cannot be carried. `strided`:
        head's arrays of two dims or more are passed as strided views even where contiguous (one task for every
        layout, for a kernel compiled for "A" arrays)."""
        if len(chunks) - 1 > self.workers:
            return False
        kinds = _kinds(head, parted, strided)
        if kinds is None or not self._busy.acquire(blocking=False):
            return False
        try:
            compiled = _compiled(kernel, kinds)
            if compiled is None:
                return False
            fn, launch = compiled
            # a kernel that raised (its exception cannot cross the C entry point): False, so that the caller runs
            # the chunks again on Python threads, where the exception reaches it
            return launch(self._ctl, fn, chunks, self._result_polls, _FUTEX_SYSCALL, *head, *parted) == 0
        except Exception:  # noqa: BLE001 - a task Numba could not build: these kinds run on Python threads from now on
            _chunks[(id(kernel), kinds)] = (kernel, None, None, None)
            return False
        finally:
            self._busy.release()

    def quiet(self) -> None:
        """Idle workers stop polling and sleep (until the next split here): a split on Python threads is starting,
        whose threads need the cores."""
        self._ctl[QUIET_SLOT::_ROW_WORDS] = 1

    def close(self) -> None:
        """Stops the workers (their loops return) and waits for them."""
        self._stop(self._ctl, self.workers, _FUTEX_SYSCALL)
        for t in self._threads:
            t.join()


def make(n: int, polls_per_us: float):
    """A NativePool of n workers, or None where this platform or Numba cannot run one (or EMBER_NATIVE_SPLIT=0)."""
    setting = os.environ.get("EMBER_NATIVE_SPLIT", "1").strip()
    if setting not in ("0", "1"):
        raise ValueError(f"EMBER_NATIVE_SPLIT must be 0 (off) or 1 (on), got {setting!r}")
    if not available() or setting == "0":
        return None
    try:
        return NativePool(n, polls_per_us)
    except Exception:  # noqa: BLE001 - an LLVM or platform without these intrinsics: batch_threads uses HandoffPool
        return None
