"""Compiling a training step's kernels on a second core while the first compiles them where called.

Where kernels compile where first called (`use_deterministic_algorithms(True)`, as `ember train` runs), a first
training step on an empty kernel cache compiles them one after another on one core, the others idle: about 12 s of
LeNet-5's first epoch. `compile_ahead(step, args, key)` forks a process that runs step(*args) once with every kernel
handed to its compiler thread (the NumPy paths serve the step, its results are dropped), then compiles the queued
kernels, the costliest first (`background.compile_cost`: the bytecode each compiles; the newest first among equals),
writing each to the disk cache. The parent goes on at once, compiling from the first: where it meets a kernel the
child has written, it loads it (milliseconds), so the two meet in the middle, on small kernels: from the last met,
the child's last compile before they met was a convolution's weight gradient (1.5 s), which the parent, done with
the rest, waited for. As torch.compile's parallel compile, only the compiling runs elsewhere; the parent's results
do not depend on what the child managed (a kernel compiled here or loaded from disk is the same code).

A split kernel's chunks run on the worker pool through entry points compiled per argument kinds (a C entry point
and a launcher: about 2 s of LeNet-5's first step). While the child runs, the parent compiles none of them but while
it waits for the child (below): where they are neither in memory nor on disk, it runs the chunks one after another,
calling the kernel's compiled code from Python (same code, same chunks: the same bits; the child holds the other
core). The child compiles every
kernel first and the entry points last, so the two processes meet in the middle of the kernels alone, and the
parent loads the entry points once they are on disk.

Where the two meet, the first to start a kernel claims it while it compiles (a file made with O_EXCL in the step's
claims folder, emptied before the fork, removed when the compile ends): the parent, needing that kernel next, waits
for the child's compile to end and loads it from disk; the child's compiler thread skips a kernel the parent has
claimed. Without claims both could compile the kernel they met (LeNet-5's weight gradient: 1.3 s of each core,
started half a second apart). While it waits, the parent compiles the entry points of kinds it has run without, from
the newest (the child takes them from the oldest), rather than leave its core idle: LeNet-5's parent waited 0.95 s
for its second convolution's weight gradient, and 0.3 s with that. Once its queue is empty, the child runs the step
again: splits its first step ran on NumPy (a product while GEMM's driver compiled) now reach their kernels and queue
the entry points the parent would otherwise compile in its own first epochs.

The child runs at a lower priority, dies with its parent, and leaves a marker under the kernel cache named by `key`
(the step's model, shapes and Ember's version): a later run with the same key starts no child. Off with the
`compile_ahead` setting (EMBER_COMPILE_AHEAD=0), without Numba, a disk cache, fork() or a second core, and where
kernels compile in the background anyway (the parent then serves NumPy meanwhile itself).

The worker pool's loops come before any of a step's kernels, in the parent, so that the child inherits them. On an
empty cache they cost about a second of the critical path, while the second core is idle: `compile_pool_ahead()`,
called before a program loads its data and builds its model (as `ember train` does), forks a process that compiles
them into the cache meanwhile; `compile_ahead` waits for it and then loads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import threading
import time

from ember import config
from ember.kernels import background, cache, parallel
from ember.kernels.numba_loader import compiled_allowed
from ember.kernels.process import die_with_parent


def _marker(key: str):
    """The file whose presence says this step's kernels were compiled ahead (None without a disk cache)."""
    folder = cache.cache_folder()
    if folder is None:
        return None
    import numba

    from ember.version import __version__

    name = hashlib.sha256(f"{key}|ember {__version__}|numba {numba.__version__}".encode()).hexdigest()[:24]
    return folder / "ahead" / name


def useful() -> bool:
    """Whether a step's kernels would be compiled ahead here (setting, platform, Numba, cores, compile mode)."""
    return (config.COMPILE_AHEAD.get() and hasattr(os, "fork") and sys.platform.startswith("linux")
            and compiled_allowed() and parallel.cores() >= 2 and not background.enabled())


def compile_ahead(step, args: tuple, key: str) -> int:
    """Start a process that compiles the kernels of step(*args) from the last (see the module's text); returns its
    pid, or 0 where none was started (not `useful()`, or this key's kernels were compiled ahead before)."""
    if not useful():
        return 0
    marker = _marker(key)
    if marker is None or marker.exists():
        return 0
    # the pool's loops first, here: the child inherits them compiled, and its step's split kernels then queue their
    # chunk entry points as this process's threads will run them
    _pool_compiled.wait(timeout=_POOL_WAIT_S)
    parallel.native()
    claims = marker.parent / f"{marker.name}.claims"
    try:
        shutil.rmtree(claims, ignore_errors=True)  # a killed run's claims: nobody is compiling those
        marker.parent.mkdir(mode=0o700, exist_ok=True)  # private, as the kernel cache it lies in
        claims.mkdir(mode=0o700)
    except OSError:
        claims = None
    parent = os.getpid()
    pid = os.fork()
    if pid:
        background.compiling_elsewhere(True)  # split kernels run their chunks without entry points meanwhile
        _gate_with(claims)
        threading.Thread(target=_reap, args=(pid, None, True), name="ember-compile-ahead-reaper",
                         daemon=True).start()
        return pid
    # the child: nothing here may return into the parent's code, whatever happens
    try:
        _in_child[0] = parent
        _gate_with(claims)
        _child(step, args, marker, parent)
    finally:
        os._exit(0)


_claims: list = [None]  # the step's claims folder while a child compiles it ahead (in the parent and the child)
_in_child = [0]  # in the child: the parent's pid
_CLAIM_POLL_S = 0.01  # reading a cache index costs about 0.1 ms


def _gate_with(claims) -> None:
    """Claim each kernel in folder `claims` before compiling it (nothing where None: no folder could be made)."""
    if claims is not None:
        _claims[0] = claims
        background.gate_compiles(_claimed)


def _claim_file(dispatcher, sig):
    """The claim's path for `dispatcher` compiled for `sig`, named by its disk cache's index file (the same path in
    both processes); None where it has no disk cache."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    if index is None or _claims[0] is None:
        return None
    return _claims[0] / hashlib.sha256(f"{index}|{sig}".encode()).hexdigest()[:24]


def _other_alive() -> bool:
    """Whether the other process of the pair still runs (from the parent: the child; from the child: the parent)."""
    return os.getppid() == _in_child[0] if _in_child[0] else background.compiling_elsewhere()


@contextlib.contextmanager
def _claimed(dispatcher, sig):
    """Around a kernel's compile (background.gate_compiles; `dispatcher` a kernel's Numba function or a CFunc)
    while a child compiles the step ahead: claim it for the time it compiles, or where the other process holds its
    claim, wait until the claim is given up (its code then on disk, to be loaded) or, on the child's compiler
    thread, skip it (background.ClaimedElsewhere)."""
    from numba.core import sigutils

    args = tuple(sigutils.normalize_signature(sig)[0])
    path = None
    if args not in getattr(dispatcher, "overloads", ()) and not background.on_disk(dispatcher, sig):
        path = _claim_file(dispatcher, args)
    if path is not None:
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            if _in_child[0] and background.on_compiler_thread():
                raise background.ClaimedElsewhere(dispatcher.__name__) from None
            while path.exists() and _other_alive() and not background.on_disk(dispatcher, sig):
                if _in_child[0] or not _work_while_waiting():
                    time.sleep(_CLAIM_POLL_S)
            path = None
        except OSError:  # the claims folder is gone (the child has ended): compile as without claims
            path = None
    try:
        yield
    finally:  # done, or failed: a kernel Numba cannot keep on disk (dynamic globals) is never there to wait for
        if path is not None:
            path.unlink(missing_ok=True)


def _work_while_waiting() -> bool:
    """In the parent, waiting for a kernel the child is compiling: compile the chunk entry points of a kinds it has
    run without, which the child would compile after its kernels (this core would idle meanwhile: LeNet-5's parent
    waited 0.95 s for a weight gradient's kernel); False where none is left."""
    from ember.kernels import thread_pool

    try:
        return thread_pool.compile_wanted_entry_points()
    except Exception:  # noqa: BLE001 - a failed build: the split that needs it compiles it and meets the error
        return False


_pool_compiled = threading.Event()  # set unless a compile_pool_ahead() process is running
_pool_compiled.set()
_POOL_WAIT_S = 60.0  # past this (a child held up: a loaded machine), the parent compiles the loops itself


def compile_pool_ahead() -> int:
    """Start a process that compiles the worker pool's loops into the kernel cache (see the module's text); returns
    its pid, or 0 where none was started (not `useful()`, no native pool here, or the loops are on disk)."""
    from ember.kernels import thread_pool

    if not useful() or not thread_pool.native_available() or cache.cache_folder() is None:
        return 0
    if parallel.get_num_threads() < 2 or thread_pool.loops_loadable():
        return 0
    pid = os.fork()
    if pid:
        _pool_compiled.clear()
        threading.Thread(target=_reap, args=(pid, _pool_compiled), name="ember-compile-ahead-reaper",
                         daemon=True).start()
        return pid
    try:
        die_with_parent()
        thread_pool.compile_loops()
    finally:
        os._exit(0)


def _reap(pid: int, finished: threading.Event | None = None, step: bool = False) -> None:
    """Wait for the child, so that it does not linger as a zombie until this process ends; then set `finished`, or
    with `step` say that no process compiles this one's step any more."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the program's)
        pass
    if finished is not None:
        finished.set()
    if step:
        background.gate_compiles(None)
        background.compiling_elsewhere(False)
        if _claims[0] is not None:
            shutil.rmtree(_claims[0], ignore_errors=True)
            _claims[0] = None


def _child(step, args: tuple, marker, parent: int) -> None:
    die_with_parent()
    os.nice(10)  # the parent's own compiles and steps come first on a shared core
    config.COMPILE_IN_BACKGROUND.set(True)
    background.hold()  # collect the whole step's kernels before compiling any
    background.put_entry_points_last()  # the parent runs chunks without them (thread_pool._compiled)
    try:
        step(*args)
    except Exception:  # noqa: BLE001 - the parent meets the same error and reports it
        return
    background.release(largest_first=True)
    if _compile_queued(step, args, parent):
        marker.parent.mkdir(mode=0o700, exist_ok=True)
        marker.touch()


def _compile_queued(step, args: tuple, parent: int) -> bool:
    """Let the compiler thread empty its queue, then run step(*args) again, as long as each run hands over new
    compiles (at most _PASSES runs): False where the parent is gone or the step raised."""
    for passes in range(_PASSES + 1):
        while not background.wait(timeout=0.5):
            if os.getppid() != parent:  # the parent is gone (no prctl on this kernel): stop
                return False
        if passes == _PASSES:
            break
        handed = background.submitted()
        try:
            step(*args)  # again, on the kernels compiled: splits that ran on NumPy reach theirs
        except Exception:  # noqa: BLE001 - the parent meets the same error and reports it
            return False
        if background.submitted() == handed:
            break
    return True


_PASSES = 3  # steps the child runs after its first, while each hands over new compiles
