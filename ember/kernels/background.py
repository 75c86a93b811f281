"""Compiling kernels in the background while their NumPy paths serve: a kernel met for the first time (not in memory,
not in the on-disk cache) is handed to one compiler thread, and the op that wanted it runs its NumPy path meanwhile.

Only an op's kernel run by a function marked `@serves` (eager dispatch, backward, the fused optimizer pass) is served
this way: there a deferred kernel's first call for new argument types raises `NotCompiledYet` before it runs
anything, and the op runs again under `numpy_instead`, where every compiled kernel is declined; the NumPy path
computes the same values to the tolerance the tests hold it to. Where the nearest op runner up the stack is marked
`@compiles_here` (graph plans, whose buffers may alias their inputs, and the eager pool), or there is none, a kernel
compiles where it is called, as without this module. A kernel already on disk is loaded where it is called (a few
milliseconds) unless the compiler thread is busy: it holds Numba's lock, so the load joins its queue. Asking which
runner is nearest walks the stack, but only on a kernel's first call for new types: an op pays nothing.
The `compile_in_background` setting (EMBER_COMPILE_IN_BACKGROUND) turns it off; `wait()` blocks until the queue is
empty (tests, benchmarks). At exit, queued compiles are dropped and the running one finishes.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections import deque

from ember import config
from ember.kernels import selection


class NotCompiledYet(RuntimeError):
    """A deferred kernel is compiling in the background; the op runs its NumPy path this time."""


class ClaimedElsewhere(RuntimeError):
    """The gate leaves a compile to another process, which has claimed it (ahead.py's child, on its compiler
    thread): the job ends without it, and a later call loads what the other process wrote."""


class _ThreadState(threading.local):
    numpy_only = 0  # > 0 while an op runs again on its NumPy path
    gated = False  # inside a kernel's compile that passed the gate (gate_compiles)


_here = _ThreadState()
_lock = threading.Condition()
_first: deque = deque()  # (key, job) it takes before any other, even while held (loads; GEMM's driver)
_queue: deque = deque()  # (key, job, cost) waiting for the compiler thread
_later: deque = deque()  # (key, job) it takes only once _queue is empty (ahead.py's child: chunk entry points)
_submitted: set = set()  # keys handed over, queued, running or finished
_finished: set = set()  # keys whose job ran (compiled, or failed: their next call compiles and raises in the caller)
_busy = [False]
_thread: list = []
_stopping = [False]
_held = [False]  # the compiler thread waits (ahead.py's child collects a whole step's kernels first)
_largest_first = [False]  # the compiler thread takes the costliest job first (the newest among equals)
_entry_points_last = [False]  # split kernels' chunk entry points go to _later (ahead.py's child)
_elsewhere = [False]  # True while another process compiles this process's step (ahead.py)
_gate: list = [None]  # around each kernel's compile while set (ahead.py's claims)
_RUNNERS: dict = {}  # code object of a function that runs op kernels -> whether it serves NumPy meanwhile


def serves(fn):
    """Mark `fn` as running op kernels and catching NotCompiledYet (it then runs the op under numpy_instead)."""
    _RUNNERS[fn.__code__] = True
    return fn


def compiles_here(fn):
    """Mark `fn` as running op kernels whose kernels compile where called (its outputs may alias its inputs)."""
    _RUNNERS[fn.__code__] = False
    return fn


def served() -> bool:
    """Whether the nearest op runner up this thread's stack (or, in a pool worker, up the stack of the thread whose
    chunks it runs) serves NumPy while kernels compile, and the setting allows it."""
    if _here.numpy_only:
        return False
    frame = sys._getframe(1)
    for _ in range(2):
        while frame is not None:
            serving = _RUNNERS.get(frame.f_code)
            if serving is not None:
                return serving and enabled()
            frame = frame.f_back
        caller = getattr(_here, "caller", None)  # set in pool workers: the thread they run chunks for
        frame = sys._current_frames().get(caller) if caller is not None else None
    return False


def caller() -> tuple:
    """(this thread's id, its NumPy-only depth): what a pool worker running chunks for it takes on (serving_for)."""
    return threading.get_ident(), _here.numpy_only


def serving_for(thread_id, numpy_only_depth: int) -> None:
    """Make this (worker) thread serve the chunks of thread `thread_id` as that thread would (see `caller`)."""
    _here.caller = thread_id
    _here.numpy_only = numpy_only_depth


class _Magic:
    """A codegen's `magic_tuple` (target triple, CPU, features), asked of LLVM once: asking again waits for LLVM's
    lock, which the compiler thread holds for seconds at a time."""

    def __init__(self, magic: tuple) -> None:
        self.magic = magic

    def magic_tuple(self) -> tuple:
        return self.magic


_magic: dict = {}


def _codegen(context) -> _Magic:
    codegen = context.codegen()
    found = _magic.get(id(codegen))
    if found is None:
        found = _magic[id(codegen)] = _Magic(codegen.magic_tuple())
    return found


def loadable(compiled, sig) -> bool:
    """Whether `compiled` (a dispatcher or CFunc) loads from disk for `sig` without waiting: it is on disk and the
    compiler thread, which holds Numba's lock while it works, is idle."""
    return not pending() and on_disk(compiled, sig)


def function_loadable(py_func, sig) -> bool:
    """Whether `py_func` compiled for `sig` loads from disk without waiting (see `loadable`)."""
    return not pending() and function_on_disk(py_func, sig)


def function_on_disk(py_func, sig) -> bool:
    """Whether Numba's disk cache beside `py_func`'s source holds it compiled for `sig` (as passed to compile)."""
    try:
        from numba.core.caching import FunctionCache
        from numba.core.registry import cpu_target

        cache = FunctionCache(py_func)
        return cache._index_key(sig, _codegen(cpu_target.target_context)) in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - no cache folder beside it, or another Numba's layout
        return False


def enabled() -> bool:
    """Whether first calls in an op run NumPy while their kernel compiles in the background (the setting)."""
    return config.COMPILE_IN_BACKGROUND.get()


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """As torch.use_deterministic_algorithms: with True, runs repeat bit for bit whatever the kernel cache holds.

    Ember's kernels give the same bits on every run for the same inputs and thread count; the one thing that
    varies is which first calls a compiled kernel serves while it compiles in the background (its NumPy path
    sums in another order). True compiles kernels where they are first called (EMBER_COMPILE_IN_BACKGROUND=0);
    `warn_only` is accepted for PyTorch's signature and changes nothing, since nothing here raises."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: expected a bool, got {type(mode).__name__}")
    config.COMPILE_IN_BACKGROUND.set(not mode)


def are_deterministic_algorithms_enabled() -> bool:
    """As torch.are_deterministic_algorithms_enabled: whether kernels compile where first called."""
    return not config.COMPILE_IN_BACKGROUND.get()


def numpy_only() -> bool:
    """Whether this thread is running an op again on its NumPy path: every compiled kernel answers None."""
    return _here.numpy_only > 0


def numpy_instead(fn, *args, **kwargs):
    """fn(*args, **kwargs) with every compiled kernel declined (an op whose kernel raised NotCompiledYet); the
    choices the first attempt recorded for explain() are dropped."""
    from ember.kernels import parallel

    selection.take_choices()
    _here.numpy_only += 1
    try:
        if not pending():
            return fn(*args, **kwargs)
        with parallel.one_core_fewer():  # the compiler thread holds one
            return fn(*args, **kwargs)
    finally:
        _here.numpy_only -= 1


def defer(dispatcher):
    """Let `dispatcher` (a Numba function) compile in the background when an op that is served (see `serves`) first
    calls it for argument types it has neither in memory nor on disk; returns it."""
    compile_now = dispatcher._compile_for_args

    def compile_for_args(*args, **kws):
        if not kws and served():
            sig = tuple(dispatcher.typeof_pyval(a) for a in args)
            key = (id(dispatcher), sig)
            if key not in _finished and (key in _submitted or not loadable(dispatcher, sig)):
                submit(key, lambda: dispatcher.compile(sig), cost=compile_cost(dispatcher.py_func))
                raise NotCompiledYet(dispatcher.py_func.__name__)
        return compile_now(*args, **kws)

    dispatcher._compile_for_args = compile_for_args  # Numba's dispatcher calls this on a call it has no code for
    return dispatcher


def gated(dispatcher):
    """Have each compile (or load) of `dispatcher` (a kernel's Numba function) run inside the gate while one is set
    (gate_compiles); returns it."""
    compile_signature = dispatcher.compile
    dispatcher.compile = lambda sig: _through_gate(dispatcher, sig, lambda: compile_signature(sig))
    return dispatcher  # Numba calls its compile for every compile: a call's, a caller's and an explicit one


def gated_entry_point(cfunc):
    """Have the compile (or load) of `cfunc` (a Numba CFunc: a C entry point) run inside the gate while one is set,
    as `gated` does for a kernel; returns it."""
    # Numba makes a CFunc's target context on first use, under a lock it takes while holding its compiler lock:
    # made inside the gate (on_disk) while another thread compiles, the two locks were taken in opposite orders
    _ = cfunc._targetdescr.target_context
    compile_now = cfunc.compile
    cfunc.compile = lambda: _through_gate(cfunc, cfunc._sig, compile_now)
    return cfunc


def _through_gate(compiled, sig, run):
    gate = _gate[0]
    if gate is None or _here.gated:  # the kernels a kernel calls compile inside its compile: its gate holds
        return run()
    _here.gated = True
    try:
        with gate(compiled, sig):
            return run()
    finally:
        _here.gated = False


def gate_compiles(gate) -> None:
    """Run each kernel's compile (or load) inside the context `gate(dispatcher, sig)`; None: no gate. While two
    processes compile one step (ahead.py), the gate keeps them from compiling the same kernel both."""
    _gate[0] = gate


def on_compiler_thread() -> bool:
    """Whether this is the compiler thread."""
    return bool(_thread) and threading.current_thread() is _thread[0]


def on_disk(compiled, sig) -> bool:
    """Whether Numba's disk cache holds `compiled` (a dispatcher or a CFunc) for `sig` (read from its index only)."""
    cache = getattr(compiled, "_cache", None)
    index_file = getattr(cache, "_cache_file", None)
    if index_file is None:
        return False  # kept off the disk: compiled in the background like a new one
    try:
        context = compiled.targetctx if hasattr(compiled, "targetctx") else compiled._targetdescr.target_context
        return cache._index_key(sig, _codegen(context)) in index_file._load_index()
    except Exception:  # noqa: BLE001 - another Numba's layout: compile where called, as without this module
        return True


def serve_or_compile(key, job, first: bool = False, cost: int = 0) -> None:
    """Where an op is served: hand `job` to the compiler thread (once per `key`; `first`, `cost`: see submit) and
    raise NotCompiledYet unless it has run; elsewhere do nothing (the caller compiles where it is)."""
    if key not in _finished and served():
        submit(key, job, first=first, cost=cost)
        raise NotCompiledYet(str(key))


def submit(key, job, later: bool = False, first: bool = False, cost: int = 0) -> None:
    """Queue `job` (a compile) for the compiler thread, once per `key`; `later`: after every job not queued so;
    `first`: before every job not queued so, and even while the queue is held (a load from disk, milliseconds,
    that an op runs slower without; GEMM's driver, which the kernels built on it call); `cost`: how much code it
    compiles (compile_cost), for the order release(largest_first=True) sets."""
    with _lock:
        if key in _submitted or _stopping[0]:
            return
        _submitted.add(key)
        if later:
            _later.append((key, job))
        elif first:
            _first.append((key, job))
        else:
            _queue.append((key, job, cost))
        if not _thread or not _thread[0].is_alive():
            _thread[:] = [threading.Thread(target=_serve, name="ember-compiler", daemon=True)]
            _thread[0].start()
        _lock.notify_all()


def handed_over(key) -> bool:
    """Whether a job of `key` was submitted (queued, running or finished)."""
    return key in _submitted


def compiling(key) -> bool:
    """Whether the job of `key` was handed over and has not run yet."""
    return key in _submitted and key not in _finished


def hold() -> None:
    """Keep queued compiles waiting until release()."""
    with _lock:
        _held[0] = True


def put_entry_points_last() -> None:
    """Have split kernels queue their chunk entry points after every kernel (see thread_pool._compiled): the process
    that compiles a step ahead makes first what its parent cannot do without."""
    _entry_points_last[0] = True


def entry_points_last() -> bool:
    """Whether split kernels queue their chunk entry points last (put_entry_points_last)."""
    return _entry_points_last[0]


def compiling_elsewhere(running: bool | None = None) -> bool:
    """Whether another process compiles this process's step now (ahead.py); `running` sets it."""
    if running is not None:
        _elsewhere[0] = running
    return _elsewhere[0]


def release(largest_first: bool = False) -> None:
    """Let the compiler thread run the queue: in order, or with `largest_first` from its costliest job (the newest
    among equals)."""
    with _lock:
        _held[0] = False
        _largest_first[0] = largest_first
        _lock.notify_all()


def compile_cost(py_func) -> int:
    """How much code compiling `py_func` costs, roughly: the bytecode of it and of every function of its module it
    calls, through the calls (inlined helpers compile inside it). Known before compiling, it orders ahead.py's
    child's queue so that the longest compiles start first."""
    found = _costs.get(py_func)
    if found is None:
        module, names, seen, found = getattr(py_func, "__module__", None), getattr(py_func, "__globals__", {}), set(), 0
        codes = [py_func.__code__] if hasattr(py_func, "__code__") else []
        while codes:
            code = codes.pop()
            found += len(code.co_code)
            codes += [c for c in code.co_consts if hasattr(c, "co_code")]  # nested functions
            for name in code.co_names:
                called = getattr(names.get(name), "py_func", names.get(name))
                if name not in seen and getattr(called, "__module__", None) == module and hasattr(called, "__code__"):
                    seen.add(name)
                    codes.append(called.__code__)
        _costs[py_func] = found
    return found


_costs: dict = {}  # py_func -> its compile_cost


def _serve() -> None:
    while True:
        with _lock:
            while not (_first or ((_queue or _later) and not _held[0])):
                _lock.wait()
            if _first:
                key, job = _first.popleft()
            elif not _queue:
                key, job = _later.popleft()
            elif _largest_first[0]:
                at = max(range(len(_queue)), key=lambda i: (_queue[i][2], i))
                key, job, _ = _queue[at]
                del _queue[at]
            else:
                key, job, _ = _queue.popleft()
            _busy[0] = True
        try:
            job()
        except Exception:  # noqa: BLE001 - the caller's next call compiles where it is and raises there
            pass
        finally:
            with _lock:
                _finished.add(key)
                _busy[0] = False
                _lock.notify_all()


def wait(timeout: float | None = None) -> bool:
    """Block until every queued compile has run; False if `timeout` seconds passed first."""
    with _lock:
        return _lock.wait_for(lambda: not _first and not _queue and not _later and not _busy[0], timeout)


def submitted() -> int:
    """How many jobs were ever handed over (queued, running or finished)."""
    return len(_submitted)


def pending() -> int:
    """How many compiles are queued or running."""
    with _lock:
        return len(_first) + len(_queue) + len(_later) + _busy[0]


@atexit.register
def _stop() -> None:
    # Queued compiles are dropped; the running one finishes, so that the interpreter never exits under LLVM.
    with _lock:
        _stopping[0] = True
        _first.clear()
        _queue.clear()
        _later.clear()
        _lock.wait_for(lambda: not _busy[0])


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Condition()  # the compiler thread does not exist in the child: its jobs start again
    _first.clear()
    _queue.clear()
    _later.clear()
    _submitted.clear()
    _finished.clear()
    _busy[0] = False
    _held[0] = _largest_first[0] = _entry_points_last[0] = _elsewhere[0] = False
    _thread.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
