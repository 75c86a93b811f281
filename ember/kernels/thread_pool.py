"""The one pool of worker threads that `parallel` splits work over.

Where Numba runs on Linux (x86-64 or AArch64), each worker is a compiled loop that never holds the GIL: it polls
its control row's `posted` counter (yielding the core between polls) and, past a budget, sleeps on a futex, so a
hand-off costs about a microsecond and an idle worker nothing. A post is either a compiled kernel's chunk, which
the loop calls through a C entry point (a Numba cfunc given the address of an argument block the caller filled:
no GIL at all), or a Python task, for which the loop returns to its thread, which takes the GIL, runs the task and
enters the loop again. The caller runs the first chunk itself and then waits for the workers' `done` counters in
compiled code, without the GIL, so the workers can run Python. A compiled chunk that its worker has not started by
then, the caller takes (a compare-and-swap on the worker's `taken` counter decides who runs it) and runs itself:
right after a GEMM, OpenBLAS's own threads hold the other cores for about 0.2 ms, and a split that waited for its
workers took 0.18-0.23 ms where one thread took 0.07-0.09 (a (96, 3136) float32 channel affine, Xeon family 6 model
167, 2026-12-02); it now takes what one thread takes, and half that where a worker is free. Elsewhere (no Numba,
another platform) the workers are plain threads woken through a condition, and compiled kernels' chunks run as
Python tasks.

A compiled kernel runs on the GIL-free path when every argument is an aligned array in the machine's byte order
(any strides), a bool, an int or a float, its last two arguments are the chunk's [start, stop), and it returns
None. Per argument kinds a cfunc is generated that rebuilds the arrays from a row of words (C-contiguous views, or
views of any layout for strided ones) and calls the kernel through its address (so the kernel is compiled once, not
again inside each entry point), with a compiled launcher that fills one of the pool's kept rows per chunk (compiled
for one signature per kinds, whatever the arrays' layouts and write flags, and called without Numba's dispatch),
both compiled once, shared by every kernel of those kinds and cached on disk like the kernels (while ahead.py's
child compiles them, the kernel's chunks run one after another in the caller, through the kernel's own compiled
code). Where a kernel raises, its cfunc's wrapper prints the exception and returns 0 (a C entry point cannot pass
it on), and the split runs again as Python tasks, where the exception reaches the caller.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
import threading
import time
from typing import NamedTuple

import numpy as np

from ember.kernels import background

IDLE_POLL_US = 300  # how long an idle worker polls for the next post before it sleeps
RESULT_POLL_US = 2000  # how long the caller polls for the workers' chunks before it sleeps
_FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98}.get(platform.machine())

_LOOPS = '''
from numba import njit

from ember.kernels.thread_intrinsics import call_task, futex, load, sched_yield, store, swap_if


# a worker's control row: counters, the posted chunk, whether its task failed, and the last post taken (by the worker
# or, for a compiled chunk the worker had not started, by the caller); two cache lines
POSTED, DONE, FN, ARG, STOP, WORKER_ASLEEP, CALLER_ASLEEP, FAILED, TAKEN, ROW = 0, 1, 2, 3, 4, 5, 6, 7, 8, 16
FUTEX_WAIT, FUTEX_WAKE = 128, 129  # the process-private forms


@njit(nogil=True, cache=True)
def _wait(ctl, i, value, asleep, polls, futex_nr):
    # until ctl[i] >= value: `polls` polls, then sleeps on the futex with ctl[asleep] raised for the waker
    for _ in range(polls):
        if load(ctl, i) >= value:
            return
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


def serve(ctl, row, seen, polls, futex_nr):
    # a worker: runs each compiled chunk posted to row `row`; returns the post's number when it is a Python task
    # (FN 0), for the thread to run and report with done(), or -1 when STOP is raised
    base = row * ROW
    while True:
        seen += 1
        _wait(ctl, base + POSTED, seen, base + WORKER_ASLEEP, polls, futex_nr)
        if load(ctl, base + STOP):
            store(ctl, base + TAKEN, load(ctl, base + POSTED))
            return -1
        # each post is taken once, in order: by this thread, or (a compiled chunk this thread had not started when
        # the caller was free) by the caller, which then ran it and raised DONE; the caller posts again only once a
        # post is taken and done, so after taking it this thread reads that post's FN and ARG
        if not swap_if(ctl, base + TAKEN, seen - 1, seen):
            continue
        fn = ctl[base + FN]
        if fn == 0:
            return seen
        if call_task(fn, ctl[base + ARG]) == 0:  # a task returns 1, or 0 where its kernel raised
            ctl[base + FAILED] = 1
        _raise(ctl, base + DONE, seen, base + CALLER_ASLEEP, futex_nr)


def done(ctl, row, seen, futex_nr):
    # a worker's Python task `seen` has finished
    base = row * ROW
    _raise(ctl, base + DONE, seen, base + CALLER_ASLEEP, futex_nr)


def post_python(ctl, workers, futex_nr):
    # a Python task to each of workers 0..workers-1
    for w in range(workers):
        base = w * ROW
        ctl[base + FN] = 0
        _raise(ctl, base + POSTED, ctl[base + POSTED] + 1, base + WORKER_ASLEEP, futex_nr)


def wait_all(ctl, workers, polls, futex_nr):
    # until workers 0..workers-1 have finished their last post (the GIL released meanwhile)
    for w in range(workers):
        base = w * ROW
        _wait(ctl, base + DONE, ctl[base + POSTED], base + CALLER_ASLEEP, polls, futex_nr)


def split(ctl, fn, blocks, block_bytes, parts, polls, futex_nr):
    # fn's chunks 1..parts-1 posted to workers 0..parts-2 (chunk k's block at blocks + k * block_bytes), chunk 0 here:
    # the number of chunks whose kernel raised. A chunk its worker has not started when the caller is free, the caller
    # takes and runs itself: a worker kept off its core (another library's threads spinning there after their own
    # work) then costs no wait, and a split is never much slower than one thread.
    for w in range(parts - 1):
        base = w * ROW
        ctl[base + FN] = fn
        ctl[base + ARG] = blocks + (w + 1) * block_bytes
        _raise(ctl, base + POSTED, ctl[base + POSTED] + 1, base + WORKER_ASLEEP, futex_nr)
    failed = 1 if call_task(fn, blocks) == 0 else 0
    for w in range(parts - 1):
        base = w * ROW
        posted = ctl[base + POSTED]
        if swap_if(ctl, base + TAKEN, posted - 1, posted):  # not started: here
            if call_task(fn, blocks + (w + 1) * block_bytes) == 0:
                failed += 1
            store(ctl, base + DONE, posted)
            continue
        _wait(ctl, base + DONE, posted, base + CALLER_ASLEEP, polls, futex_nr)
        failed += ctl[base + FAILED]
        ctl[base + FAILED] = 0
    return failed


def stop(ctl, workers, futex_nr):
    # every worker returns from serve
    for w in range(workers):
        base = w * ROW
        store(ctl, base + STOP, 1)
        _raise(ctl, base + POSTED, ctl[base + POSTED] + 1, base + WORKER_ASLEEP, futex_nr)


def spin(ctl, polls):
    # `polls` polls of a counter that never moves: how fast this machine polls
    for _ in range(polls):
        if load(ctl, 0) > 0:
            return
        sched_yield()
'''

# Per argument kinds: `task`, a chunk's C entry point, rebuilds the kernel's arguments from a row of int64 words
# (floats stored as their bits) and calls the kernel through the address the row carries; `launch` fills one row
# per chunk of the pool's block from the arguments themselves (in compiled code: reading an address from Python
# costs a microsecond an array) and runs the split. The task calls the kernel by its address rather than by name:
# a call by name links the kernel's code into the task's, where LLVM optimises and compiles it a second time (0.5-0.8
# s for the direct convolution's kernels, on every empty cache, in every process); the launcher calls the pool's
# split by its address for the same reason (0.03-0.04 s of each launcher's compile). The rows are the pool's, kept
# across splits (one split runs at a time, and a worker reads its row only once it has taken the chunk), so `launch`
# allocates nothing: allocating and viewing a block there was 0.3 s of the first launcher's compile in a process.
# Both read and write the row, and view the arrays, through thread_intrinsics' word/put/array_at/strided_at rather
# than carray, as_strided and .ctypes: LeNet-5's nine argument kinds compiled in 2.15 s against 3.23 s.
_CHUNK = '''
import numpy as np
from numba import njit

from ember.kernels.thread_intrinsics import array_at, call_compiled, call_split, data_of, put, real, strided_at, word


def task(block):
    # 1; where the kernel raises, the cfunc's wrapper prints the exception and returns 0
    call_compiled(word(block, {size} - 3), ({arguments},), {expected!r})
    return 1


@njit(nogil=True, cache=True)
def launch(ctl, fn, chunks, polls, futex, kernel, rows, split, {parameters}):
    # the number of chunks whose kernel raised; `kernel`: the kernel's address; `rows`: the address of {size} int64
    # words for each chunk; `split`: the address of the pool's compiled split
    parts = chunks.shape[0]
    for k in range(parts):
        row = rows + k * {size} * 8
{packing}
        put(row, {size} - 3, kernel)
        put(row, {size} - 2, chunks[k, 0])
        put(row, {size} - 1, chunks[k, 1])
    return call_split(split, ctl, fn, rows, {size} * 8, parts, polls, futex)
'''

_ROW_WORDS = 16  # _LOOPS' ROW
_LOOP_SIGNATURES = {"serve": "int64(int64[::1], int64, int64, int64, int64)",
                    "done": "void(int64[::1], int64, int64, int64)",
                    "post_python": "void(int64[::1], int64, int64)",
                    "wait_all": "void(int64[::1], int64, int64, int64)",
                    "split": "int64(int64[::1], int64, int64, int64, int64, int64, int64)",
                    "stop": "void(int64[::1], int64, int64)",
                    "spin": "void(int64[::1], int64)"}


def loops_ready() -> bool:
    """Whether a pool can start now: its workers' loops are compiled, on disk, or not needed (plain threads, or
    compiles in the caller); else they are handed to the background compiler and the caller runs without a pool."""
    if not background.enabled() or not native_available():
        return True
    if background.compiling("thread pool loops"):
        return False
    if loops_loadable():
        return True
    background.submit("thread pool loops", compile_loops)
    return False


def loops_loadable() -> bool:
    """Whether the workers' loops are compiled in this process or on disk, to be loaded in milliseconds."""
    from ember.kernels import cache

    module = cache.load_source(_LOOPS)
    return all(f"jitted_{name}" in module.__dict__ or background.function_loadable(module.__dict__[name], signature)
               for name, signature in _LOOP_SIGNATURES.items())


def compile_loops() -> None:
    """Compile the workers' loops here (each written to the disk cache), or load them where they are there."""
    from ember.kernels.numba_loader import compiled_function

    for name, signature in _LOOP_SIGNATURES.items():
        compiled_function(_LOOPS, name, signature_or_function=signature)


def native_available() -> bool:
    """Whether this platform can run GIL-free workers (Linux futexes on x86-64 or AArch64, and Numba)."""
    from ember.kernels.numba_loader import compiled_allowed

    return sys.platform.startswith("linux") and _FUTEX_SYSCALL is not None and compiled_allowed()


def _plain(a: np.ndarray) -> bool:
    """Whether the block can carry `a`: aligned, in the machine's byte order."""
    return a.flags.aligned and a.dtype.isnative


def _kinds(head: tuple, parted: tuple, strided: bool = False):
    """The kinds of the arguments (an array's dtype character and dims, "p"-prefixed in parted, "s"-prefixed where
    not C-contiguous, or with `strided` wherever it has two dims or more; a scalar's "b", "i" or "f"), or None for
    one the block cannot carry (a misaligned or byte-swapped array, a parted one whose rows are not each
    C-contiguous, a float32 scalar, an object)."""
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
        if type(p) is not np.ndarray or not _plain(p) or not _rows_contiguous(p):
            return None
        kinds.append(("p" + p.dtype.char, p.ndim))
    return tuple(kinds)


def _rows_contiguous(p: np.ndarray) -> bool:
    """Whether each row of a parted array is C-contiguous, the rows apart in order (each chunk's scratch may lie
    in its own place: direct._scratch)."""
    if p.flags.c_contiguous:
        return True
    if p.ndim < 2 or p.strides[0] < p[0].nbytes:
        return False
    return p[0].flags.c_contiguous


def _chunk_source(kinds) -> tuple:
    """(_CHUNK for argument `kinds`, the words of a chunk's row): arrays as address then shape, a parted array as its
    row k's."""
    arguments, packing, parameters, at = [], [], [], 0
    for i, kind in enumerate(kinds):
        p = f"p{i}"
        parameters.append(p)
        if kind in ("b", "i", "f"):
            arguments.append({"b": f"word(block, {at}) != 0", "i": f"word(block, {at})",
                              "f": f"real(block, {at})"}[kind])
            packing.append(f"put(row, {at}, {p})")
            at += 1
            continue
        code, ndim = kind
        skip = 1 if code[:-1] == "p" else 0  # a parted array's first dim is the chunk
        dims = range(skip, ndim)
        dtype = np.dtype(code[-1])
        name = "bool_" if dtype == np.bool_ else dtype.name
        shape = "".join(f"word(block, {at + 1 + d}), " for d in range(len(dims)))
        row = f" + k * {p}.strides[0]" if skip else ""
        packing.append(f"put(row, {at}, data_of({p}){row})")
        packing += [f"put(row, {at + 1 + d}, {p}.shape[{dim}])" for d, dim in enumerate(dims)]
        if code[:-1] == "s":  # strided: its strides (bytes) follow its shape
            strides = "".join(f"word(block, {at + 1 + ndim + d}), " for d in range(ndim))
            arguments.append(f"strided_at(word(block, {at}), ({shape}), ({strides}), np.{name})")
            packing += [f"put(row, {at + 1 + ndim + d}, {p}.strides[{d}])" for d in range(ndim)]
            at += 1 + 2 * ndim
            continue
        arguments.append(f"array_at(word(block, {at}), ({shape}), np.{name})")
        at += 1 + len(dims)
    arguments += [f"word(block, {at + 1})", f"word(block, {at + 2})"]  # after the kernel's address: [start, stop)
    source = _CHUNK.format(size=at + 3, arguments=", ".join(arguments),
                           expected=str(_kernel_types(kinds)), parameters=", ".join(parameters),
                           packing="\n".join(" " * 8 + line for line in packing))
    return source, at + 3


def _scalar_type(kind: str):
    """The Numba type a scalar of kind "b", "i" or "f" is carried as."""
    from numba import types

    return {"b": types.boolean, "i": types.int64, "f": types.float64}[kind]


@functools.cache  # every split run without entry points (while they compile) asks: 50-110 us built anew
def _kernel_types(kinds) -> tuple:
    """The Numba types `task` passes the kernel for argument `kinds`: what carray and as_strided make of the block."""
    from numba import from_dtype, types

    found = []
    for kind in kinds:
        if kind in ("b", "i", "f"):
            found.append(_scalar_type(kind))
            continue
        code, ndim = kind
        dtype = from_dtype(np.dtype(code[-1]))
        found.append(types.Array(dtype, ndim - 1, "C") if code[:-1] == "p"
                     else types.Array(dtype, ndim, "A") if code[:-1] == "s" else types.Array(dtype, ndim, "C"))
    return (*found, types.int64, types.int64)


@functools.cache
def _launch_types(kinds) -> tuple:
    """The Numba types `launch` is compiled for with argument `kinds`: the pool's words and chunks, then every
    argument as `kinds` says, read-only, and a strided one as "A" whatever its layout. One signature per kinds, so
    that no array's layout or write flag compiles the launcher again (it reads addresses, shapes and strides only):
    typed by the values instead, a C-, an F-ordered and a transposed operand of one sgemm kinds compiled it three
    times, 0.2-0.4 s each, in the caller."""
    from numba import from_dtype, types

    words, chunks = types.Array(types.int64, 1, "C"), types.Array(types.int64, 2, "C")
    found = [words, types.int64, chunks, types.int64, types.int64, types.int64, types.int64, types.int64]
    for kind in kinds:
        if kind in ("b", "i", "f"):
            found.append(_scalar_type(kind))
            continue
        code, ndim = kind
        layout = "A" if code[:-1] == "s" else "C"
        found.append(types.Array(from_dtype(np.dtype(code[-1])), ndim, layout, readonly=True))
    return tuple(found)


# (id(kernel), kinds) -> (kernel, task address, launch, kernel address, words, task, the kernel's entry point), or Nones
# (launch: the launcher's compiled entry point, called without Numba's dispatch: _kinds has checked what its types say)
_chunks: dict = {}
_entries: dict = {}  # kinds -> (task, launch, words): one entry point and launcher serve every kernel of those kinds
_chunks_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _chunks_lock
    _chunks_lock = threading.Lock()  # a thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _entry(kinds):
    """(task, launch, words of a chunk's row) for argument `kinds`, made once (compiled, or loaded from disk, where
    first needed)."""
    found = _entries.get(kinds)
    if found is None:
        from numba import types
        from numba.core.ccallback import CFunc

        from ember.kernels import cache
        from ember.kernels.numba_loader import numba_cache_path

        signature = ((types.int64,), types.int64)
        source, words = _chunk_source(kinds)
        module = cache.load_source(source)
        task = CFunc(module.task, signature, locals={}, options={"error_model": "numpy"})
        path = numba_cache_path(module)
        if path is not None:
            task.enable_caching()
            if task._cache.cache_path != path:  # a locator picked another folder: never load from there
                task = CFunc(module.task, signature, locals={}, options={"error_model": "numpy"})
        launch = module.launch
        if path is None or launch.stats.cache_path != path:
            launch.disable_caching()
        found = _entries[kinds] = (task, launch, words)
    return found


def _overload(kernel, argument_types):
    """The compiled overload of `kernel` that `task` can call with arguments of those types: compiled for them, or (a
    kernel compiled for explicit signatures) for arrays of the same dtypes and dims that they convert to without a
    copy (any layout to "A", writable to read-only), which Numba passes the same way; or None."""
    found = kernel.overloads.get(argument_types)
    if found is not None:
        return found
    for sig, compiled in kernel.overloads.items():
        if len(sig) == len(argument_types) and all(_passes_as(t, s) for t, s in zip(argument_types, sig)):
            return compiled
    return None


def _passes_as(given, wanted) -> bool:
    """Whether an argument of Numba type `given` may be passed where `wanted` is compiled for, as it lies."""
    from numba import types

    if given == wanted:
        return True
    return (isinstance(given, types.Array) and isinstance(wanted, types.Array) and given.dtype == wanted.dtype
            and given.ndim == wanted.ndim and wanted.layout in ("A", given.layout)
            and (given.mutable or not wanted.mutable) and given.aligned == wanted.aligned)


def _compiled(kernel, kinds):
    """(task address, launch, kernel address, words of a chunk's row) for `kernel` and argument `kinds`, compiled (or
    loaded from disk) once; None where that failed before."""
    key = (id(kernel), kinds)
    found = _chunks.get(key)
    if found is not None and found[0] is kernel:
        return None if found[1] is None else found[1:5]
    if background.compiling(key):  # handed over already: serve NumPy without looking at the disk again
        background.serve_or_compile(key, None)
    argument_types, launch_types = _kernel_types(kinds), _launch_types(kinds)
    with _chunks_lock:
        task, launch, words = _entry(kinds)
    if not background.served():  # compiled here: the entry points, if missing, compile elsewhere meanwhile
        kernel_only = _while_entry_compiles(kernel, argument_types, task, launch, launch_types, key)
        if kernel_only is not None:
            return kernel_only
    task_ready = task._wrapper_address is not None or background.loadable(task, task._sig)
    launch_ready = launch_types in launch.overloads or background.loadable(launch, launch_types)
    if not (task_ready and launch_ready and (_overload(kernel, argument_types) is not None
                                             or background.loadable(kernel, argument_types))):
        def compile_all():  # on the compiler thread: the kernel and its entry points
            _compiled_overload(kernel, argument_types)
            _compile_entry_points(task, launch, launch_types)

        job = compile_all
        if background.entry_points_last():  # ahead.py's child: the kernel now (unless the parent has claimed it),
            # its entry points after every kernel
            background.submit(("entry points", key),
                              functools.partial(_compile_entry_points, task, launch, launch_types), later=True)
            job = functools.partial(_compiled_overload, kernel, argument_types)
        background.serve_or_compile(key, job, cost=background.compile_cost(kernel.py_func))
    with _chunks_lock:
        found = _chunks.get(key)
        if found is not None and found[0] is kernel:  # compiled meanwhile (in the background)
            return None if found[1] is None else found[1:5]
        _compile_entry_points(task, launch, launch_types)  # shared by every kernel of these kinds: once
        compiled = _compiled_overload(kernel, argument_types)
        address = compiled.library.get_pointer_to_function(compiled.fndesc.llvm_func_name)
        run = launch.overloads[launch_types].entry_point
        # the CFunc keeps its code alive
        _chunks[key] = (kernel, task.address, run, address, words, task, compiled.entry_point)
    return task.address, run, address, words


def run_ready_chunk(kernel, head: tuple, parted: tuple, start: int, stop: int, strided: bool = False) -> bool:
    """kernel(*head, *(p[0] for p in parted), start, stop) in the caller through the kernel's compiled entry point,
    where the pool has run it on arguments of these kinds before; False (nothing run) otherwise. One chunk needs no
    workers, and the launcher's call (a dispatch on a dozen arguments) cost 5 us, more than a small pass's whole run:
    channel_affine on (1, 96, 14, 14) took 11.8 us through it, 2.7 through the entry point (AMD EPYC Zen 3)."""
    kinds = _kinds(head, parted, strided)
    found = _chunks.get((id(kernel), kinds)) if kinds is not None else None
    if found is None or found[0] is not kernel or found[6] is None:
        return False
    found[6](*head, *(p[0] for p in parted), start, stop)
    return True


class _KernelOnly(NamedTuple):
    """What _compiled answers for a kernel whose chunks run in the caller, without entry points, for now."""

    entry_point: object  # the kernel's compiled overload, callable from Python (it releases the GIL)


_looked: dict = {}  # (task, launch types) -> when the disk was last looked at for those entry points
_LOOK_EVERY_S = 0.5  # reading a cache index costs about 0.1 ms: not at every split


def _while_entry_compiles(kernel, argument_types, task, launch, launch_types, key):
    """Where kernels compile where called: if the chunk entry points for these kinds are not in memory and cannot be
    loaded from disk at once, `kernel` compiled (or loaded) here for `argument_types`, to be called from Python for
    each chunk, while the compiler thread compiles the entry points (the same code on the same chunks gives the same
    bits, so the caller never waits for them); while another process compiles this one's step (ahead.py), they are
    left to it until they are on disk. None where they are ready or load here (on disk, the compiler thread idle: a
    few milliseconds), or where the compiler thread failed to build them (the caller then compiles them and meets
    the error)."""
    if task._wrapper_address is not None and launch_types in launch.overloads:
        return None
    job, build = ("entry points", key), functools.partial(_compile_entry_points, task, launch, launch_types)
    if background.handed_over(job):
        if not background.compiling(job):
            return None  # built and still missing: it failed
    elif background.compiling_elsewhere():
        if _on_disk(task, launch, launch_types, every=_LOOK_EVERY_S):
            background.submit(job, build, first=True)
        else:
            _wanted.setdefault(key, (task, launch, launch_types))
    elif _on_disk(task, launch, launch_types):
        if not background.pending():
            return None
        background.submit(job, build, first=True)  # a load: ahead of the compiles queued
    else:
        background.submit(job, build)
    with _chunks_lock:
        return _KernelOnly(_compiled_overload(kernel, argument_types).entry_point)


# (id(kernel), kinds) -> (task, launch, launch types): the entry points this process has run without while another
# process compiles its step (ahead.py), in the order it met them
_wanted: dict = {}


def compile_wanted_entry_points() -> bool:
    """Compile (or load) the entry points of the newest kinds this process has run without while another process
    compiles its step, unless already handed to the compiler thread: ahead.py's parent does it while it waits for a
    kernel the child is compiling, instead of idling (the child takes them from the oldest). False where none was
    left to compile."""
    while _wanted:
        key, (task, launch, launch_types) = _wanted.popitem()
        if background.handed_over(("entry points", key)):
            continue  # the compiler thread has it (a load from disk): never two compiles of one CFunc at once
        if task._wrapper_address is None or launch_types not in launch.overloads:
            _compile_entry_points(task, launch, launch_types)
            return True
    return False


def _on_disk(task, launch, launch_types, every: float = 0.0) -> bool:
    """Whether a kinds' entry point and launcher are both in memory or on disk; `every`: look at the disk at most
    that often (reading a cache index costs about 0.1 ms, too much for every split), answering False between."""
    now = time.monotonic()
    looked = _looked.get((task, launch_types))
    if every and looked is not None and now - looked < every:
        return False
    _looked[(task, launch_types)] = now
    return ((task._wrapper_address is not None or background.on_disk(task, task._sig))
            and (launch_types in launch.overloads or background.on_disk(launch, launch_types)))


def _compile_entry_points(task, launch, launch_types) -> None:
    """A kinds' chunk entry point and launcher, compiled (or loaded from disk), on the compiler thread."""
    if task._wrapper_address is None:
        task.compile()
    if launch_types not in launch.overloads:
        launch.compile(launch_types)


def _compiled_overload(kernel, argument_types):
    """The overload of `kernel` for `argument_types` (see _overload), compiled or loaded from disk where missing."""
    compiled = _overload(kernel, argument_types)
    if compiled is None:
        kernel.compile(argument_types)
        compiled = kernel.overloads[argument_types]
    if str(compiled.signature.return_type) != "none":  # a chunk's task returns nothing
        raise TypeError(f"{kernel.py_func.__name__}: a kernel run on the pool must return None, not "
                        f"{compiled.signature.return_type}")
    return compiled


class Pool:
    """`n` worker threads. run(tasks) runs Python tasks, try_run_kernel() a compiled kernel's chunks; the caller
    always takes the first chunk. One split at a time: a concurrent or nested one runs its chunks in the caller."""

    def __init__(self, n: int) -> None:
        self.workers = n
        self.native = False
        self._busy = threading.Lock()
        self._tasks: list = [None] * n
        self._caller = (None, 0)
        self._results: list = [None] * n
        self._blocks: dict = {}  # words -> launch's rows for chunks of that many words, kept across splits
        self._rows: dict = {}  # words -> the address of those rows
        if native_available():
            try:
                self._start_native()
                self.native = True
            except Exception:  # noqa: BLE001 - an LLVM or platform without these intrinsics: plain threads
                self.native = False
        if not self.native:
            self._cond = threading.Condition()
            self._posted = [0] * n
            self._done = [0] * n
            self._stopping = False
        self._threads = [threading.Thread(target=self._serve_native if self.native else self._serve_python,
                                          args=(w,), name=f"ember-worker-{w}", daemon=True) for w in range(n)]
        for t in self._threads:
            t.start()

    def _start_native(self) -> None:
        from ember.kernels.numba_loader import compiled_function

        # compiled here, for the argument types they are called with, so that a failure shows before a thread starts
        loops = {name: compiled_function(_LOOPS, name, signature_or_function=signature)
                 for name, signature in _LOOP_SIGNATURES.items()}
        self._loop_serve, self._loop_done, self._post_python = loops["serve"], loops["done"], loops["post_python"]
        self._wait_all, self._stop = loops["wait_all"], loops["stop"]
        split = next(iter(loops["split"].overloads.values()))  # called by the launchers through its address
        self._split = split.library.get_pointer_to_function(split.fndesc.llvm_func_name)
        raw = np.zeros(self.workers * _ROW_WORDS + 8, np.int64)  # rows on their own cache lines: 64-byte aligned
        skip = (-raw.ctypes.data % 64) // 8
        self._ctl = raw[skip:skip + self.workers * _ROW_WORDS]
        per_us = _polls_per_us(loops["spin"])
        self._idle_polls = max(1, int(IDLE_POLL_US * per_us))
        self._result_polls = max(1, int(RESULT_POLL_US * per_us))

    # --- Python tasks ---------------------------------------------------------------------------------------------
    def run(self, tasks: list) -> list:
        """Results of the zero-argument callables `tasks` (in order), the first run by the caller; the first error
        of any task is raised once every task has finished."""
        helpers = len(tasks) - 1
        if helpers == 0 or helpers > self.workers or not self._busy.acquire(blocking=False):
            return [t() for t in tasks]
        try:
            for w in range(helpers):
                self._tasks[w] = tasks[w + 1]
            self._caller = background.caller()  # whose op the chunks serve, and whether it runs NumPy only
            self._post(helpers)
            try:
                first = tasks[0]()
            finally:
                self._await(helpers)
                outcomes = self._results[:helpers]
                for w in range(helpers):  # hold no task (and the arrays it closes over) past this split
                    self._tasks[w] = self._results[w] = None
            results = [first]
            for ok, value in outcomes:
                if not ok:
                    raise value
                results.append(value)
            return results
        finally:
            self._busy.release()

    def _post(self, helpers: int) -> None:
        if self.native:
            self._post_python(self._ctl, helpers, _FUTEX_SYSCALL)
            return
        with self._cond:
            for w in range(helpers):
                self._posted[w] += 1
            self._cond.notify_all()

    def _await(self, helpers: int) -> None:
        if self.native:
            self._wait_all(self._ctl, helpers, self._result_polls, _FUTEX_SYSCALL)  # without the GIL
            return
        with self._cond:
            while any(self._done[w] < self._posted[w] for w in range(helpers)):
                self._cond.wait()

    def _run_task(self, w: int) -> None:
        background.serving_for(*self._caller)
        try:
            self._results[w] = (True, self._tasks[w]())
        except BaseException as e:  # noqa: BLE001 - raised again in the caller
            self._results[w] = (False, e)

    def _serve_native(self, w: int) -> None:
        seen = 0
        while True:
            seen = self._loop_serve(self._ctl, w, seen, self._idle_polls, _FUTEX_SYSCALL)  # releases the GIL
            if seen < 0:
                return
            self._run_task(w)
            self._loop_done(self._ctl, w, seen, _FUTEX_SYSCALL)

    def _serve_python(self, w: int) -> None:
        seen = 0
        while True:
            with self._cond:
                while self._posted[w] <= seen and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                seen = self._posted[w]
            self._run_task(w)
            with self._cond:
                self._done[w] = seen
                self._cond.notify_all()

    # --- compiled kernels -----------------------------------------------------------------------------------------
    def try_run_kernel(self, kernel, head: tuple, parted: tuple, chunks: np.ndarray, strided: bool = False) -> bool:
        """kernel(*head, *(p[k] for p in parted), start, stop) for each chunk k, [start, stop) = chunks[k], chunk 0
        in the caller, all without the GIL; False (and nothing run) where the pool has no GIL-free workers, is busy,
        or an argument cannot be carried. `strided`: head's arrays of two dims or more are passed as strided views
        even where contiguous (one task for every layout, for a kernel compiled for "A" arrays)."""
        if not self.native or len(chunks) - 1 > self.workers:
            return False
        if chunks.dtype != np.int64 or not chunks.flags.c_contiguous:  # as the launcher reads them
            chunks = np.ascontiguousarray(chunks, np.int64)
        kinds = _kinds(head, parted, strided)
        if kinds is None or not self._busy.acquire(blocking=False):
            return False
        try:
            try:
                compiled = _compiled(kernel, kinds)
                if compiled is None:
                    return False
                if not isinstance(compiled, _KernelOnly):
                    fn, launch, address, words = compiled
                    # a kernel that raised (its exception cannot cross the C entry point): False, so that the caller
                    # runs the chunks again as Python tasks, where the exception reaches it
                    rows = self._rows.get(words) or self._new_rows(words)
                    return launch(self._ctl, fn, chunks, self._result_polls, _FUTEX_SYSCALL, address, rows,
                                  self._split, *head, *parted) == 0
            except background.NotCompiledYet:  # compiling in the background: the op runs its NumPy path meanwhile
                raise
            except Exception:  # noqa: BLE001 - a task Numba could not build: these kinds run as Python tasks now on
                _chunks[(id(kernel), kinds)] = (kernel, None, None, None, None, None, None)
                return False
            # its entry points are compiling in another process, which holds the other core: the kernel's own code
            # on the same chunks, one after another here (a worker would wait for that core)
            entry = compiled.entry_point
            for k in range(len(chunks)):
                entry(*head, *(p[k] for p in parted), int(chunks[k, 0]), int(chunks[k, 1]))
            return True
        finally:
            self._busy.release()

    def _new_rows(self, words: int) -> int:
        """The address of the pool's rows of `words` words, one for each chunk it can run at once (made once per
        width, kept for the pool's life)."""
        block = self._blocks[words] = np.zeros((self.workers + 1, words), np.int64)
        self._rows[words] = block.ctypes.data
        return block.ctypes.data

    def close(self) -> None:
        """Stop the workers (their loops return) and wait for them."""
        if self.native:
            self._stop(self._ctl, self.workers, _FUTEX_SYSCALL)
        else:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
        for t in self._threads:
            t.join()


def _polls_per_us(spin) -> float:
    """How many polls of a counter this machine makes per microsecond (the idle and result budgets are in us)."""
    counters = np.zeros(1, np.int64)
    spin(counters, 1)  # warm
    polls = 20_000
    start = time.perf_counter()
    spin(counters, polls)
    return polls / max((time.perf_counter() - start) * 1e6, 1e-3)
