"""An MXNet-style dependency engine: kernels pushed with the variables they read and write.

Each `Var` stands for one buffer. A pushed kernel runs on the worker pool once every variable it
reads has no earlier pending writer and every variable it writes has no earlier pending reader or
writer, so non-conflicting kernels run at once (NumPy and BLAS release the GIL) while each buffer
sees its reads and writes in push order. A kernel that raises marks the variables it writes; the
error surfaces, named after the op, at the next synchronisation: `wait_for_all()` or waiting to read
one of those variables. Kernels that read a failed variable are skipped and pass the error on.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading

from ember.runtime import profiler as _profiler
from ember.runtime.threads import get_num_interop_threads


class EngineError(RuntimeError):
    """A kernel run by the engine failed; `op_name` names it, `__cause__` is the original error.

    The error raised is also an instance of the original error's type where Python allows it.
    """

    def __init__(self, message: str, op_name: str) -> None:
        super().__init__(message)
        self.op_name = op_name

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class Var:
    """One engine variable (a buffer): the queue of kernels waiting to touch it."""

    __slots__ = ("name", "queue", "readers", "writing", "error", "__weakref__")
    _ids = itertools.count()

    def __init__(self, name: str | None = None) -> None:
        self.name = name if name is not None else f"var{next(Var._ids)}"
        self.queue: collections.deque = collections.deque()  # (opr, is_write) not yet granted
        self.readers = 0  # granted reads still running or waiting to run
        self.writing = False  # a granted write still running or waiting to run
        self.error: EngineError | None = None

    def __repr__(self) -> str:
        return f"<Var {self.name}>"


class _Opr:
    """A pushed kernel and how many of its dependencies are still unmet."""

    __slots__ = ("fn", "reads", "writes", "name", "wait", "info", "done")

    def __init__(self, fn, reads, writes, name, info) -> None:
        self.fn = fn
        self.reads = reads
        self.writes = writes
        self.name = name
        self.info = info
        self.wait = len(reads) + len(writes) + 1  # +1: the push itself, released when pushing ends
        self.done = None  # an Event for synchronisation kernels


_worker_state = threading.local()


def in_worker() -> bool:
    """True inside a kernel run by an engine worker thread."""
    return getattr(_worker_state, "active", False)


class Engine:
    """The dependency tracker and its worker pool."""

    def __init__(self, n_threads: int) -> None:
        self.n_threads = n_threads
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._ready: collections.deque = collections.deque()
        self._has_work = threading.Condition(self._lock)
        self._pending = 0
        self._errors: list = []
        self._workers: list = []
        self._stopping = False

    # --- variables and pushing ---------------------------------------------------------------
    def new_var(self, name: str | None = None) -> Var:
        """A fresh variable."""
        return Var(name)

    def push(self, fn, reads=(), writes=(), name: str = "kernel", info=None) -> None:
        """Schedule `fn()` after the earlier kernels that conflict with its reads and writes."""
        writes = tuple(dict.fromkeys(writes))
        wset = set(map(id, writes))
        reads = tuple(v for v in dict.fromkeys(reads) if id(v) not in wset)
        self._push(_Opr(fn, reads, writes, name, info))

    def _push(self, opr: _Opr) -> None:
        if not self._workers:
            self._start()
        with self._lock:
            self._pending += 1
            met = 1
            for v in opr.reads:
                if not v.queue and not v.writing:
                    v.readers += 1
                    met += 1
                else:
                    v.queue.append((opr, False))
            for v in opr.writes:
                if not v.queue and not v.writing and v.readers == 0:
                    v.writing = True
                    met += 1
                else:
                    v.queue.append((opr, True))
            opr.wait -= met
            if opr.wait == 0:
                self._ready.append(opr)
                self._has_work.notify()

    # --- running -------------------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if self._workers:
                return
            self._stopping = False
            for i in range(self.n_threads):
                t = threading.Thread(target=self._work, name=f"ember-engine-{i}", daemon=True)
                self._workers.append(t)
                t.start()

    def _work(self) -> None:
        _worker_state.active = True
        lock = self._lock
        while True:
            with lock:
                while not self._ready and not self._stopping:
                    self._has_work.wait()
                if not self._ready:
                    return
                opr = self._ready.popleft()
            while opr is not None:
                opr = self._run(opr)

    def _run(self, opr: _Opr):
        """Run one kernel; returns a newly ready kernel for this thread to run next (or None)."""
        err = None
        for v in opr.reads:
            if v.error is not None:
                err = v.error  # an input was never computed: pass its error on
                break
        if err is None and opr.done is None:
            rec = _profiler.state.active
            try:
                if rec is None:
                    opr.fn()
                else:
                    rec.timed(opr.fn, opr.name, opr.info, "engine")
            except BaseException as e:  # noqa: BLE001 - reported at the next synchronisation
                err = _engine_error(opr.name, e)
                with self._lock:
                    self._errors.append(err)
        return self._complete(opr, err)

    def _complete(self, opr: _Opr, err):
        nxt = None
        with self._lock:
            granted: list = []
            sync = opr.done is not None
            for v in opr.writes:
                if not sync:  # a successful write makes the value valid again
                    v.error = err
                v.writing = False
                _grant(v, granted)
            for v in opr.reads:
                v.readers -= 1
                _grant(v, granted)
            for o in granted:
                o.wait -= 1
                if o.wait == 0:
                    if nxt is None and o.done is None:
                        nxt = o
                    else:
                        self._ready.append(o)
                        self._has_work.notify()
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()
        if opr.done is not None:
            opr.done.set()
        return nxt

    # --- synchronisation -------------------------------------------------------------------------
    def wait_for_var(self, var: Var, write: bool = False) -> None:
        """Block until the pending writers of `var` are done (and its readers, with write=True)."""
        with self._lock:
            busy = var.writing or any(w for _, w in var.queue) or (write and (var.readers or var.queue))
        if busy:
            _check_not_in_worker("wait_for_var")
            opr = _Opr(None, () if write else (var,), (var,) if write else (), "wait", None)
            opr.done = threading.Event()
            self._push(opr)
            opr.done.wait()
        err = var.error
        if err is not None:
            with self._lock:
                if err in self._errors:
                    self._errors.remove(err)
            raise err

    def wait_for_all(self) -> None:
        """Block until every pushed kernel has run; raise the first error since the last sync."""
        with self._lock:
            if self._pending:
                _check_not_in_worker("wait_for_all")
            while self._pending:
                self._idle.wait()
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def pending(self) -> int:
        """Kernels pushed and not yet finished."""
        return self._pending

    def stop(self) -> None:
        """Finish queued work and stop the workers (they restart on the next push)."""
        with self._lock:
            while self._pending:
                self._idle.wait()
            self._stopping = True
            self._has_work.notify_all()
            workers, self._workers = self._workers, []
        for t in workers:
            if t is not threading.current_thread():
                t.join()


_ERROR_TYPES: dict = {}  # original exception type -> EngineError subclass that is also that type


def _engine_error(op_name: str, exc: BaseException) -> EngineError:
    """An EngineError naming the op that is also an instance of the original error's type when it can
    be (so `except IndexError` still catches an index error reported at a later sync)."""
    cls = _ERROR_TYPES.get(type(exc))
    if cls is None:
        cls = EngineError
        if isinstance(exc, Exception) and not isinstance(exc, EngineError):
            try:
                cls = type(f"EngineError[{type(exc).__name__}]", (EngineError, type(exc)), {})
            except TypeError:  # incompatible layouts (OSError and the like): a plain EngineError
                cls = EngineError
        _ERROR_TYPES[type(exc)] = cls
    try:
        err = cls(f"{op_name} failed: {type(exc).__name__}: {exc}", op_name)
    except TypeError:
        err = EngineError(f"{op_name} failed: {type(exc).__name__}: {exc}", op_name)
    err.__cause__ = exc
    return err


def _grant(v: Var, granted: list) -> None:
    """Give `v` to the kernels at the head of its queue that may now run (under the lock)."""
    q = v.queue
    while q:
        opr, is_write = q[0]
        if is_write:
            if v.readers == 0 and not v.writing:
                q.popleft()
                v.writing = True
                granted.append(opr)
            return
        if v.writing:
            return
        q.popleft()
        v.readers += 1
        granted.append(opr)


def _check_not_in_worker(what: str) -> None:
    if in_worker():
        raise RuntimeError(f"{what}: a kernel running on the engine cannot wait for other kernels (deadlock)")


_engine: list = [None]
_engine_lock = threading.Lock()


def get_engine() -> Engine:
    """The process-wide engine (created on first use with get_num_interop_threads() workers)."""
    eng = _engine[0]
    if eng is None:
        with _engine_lock:
            eng = _engine[0]
            if eng is None:
                eng = _engine[0] = Engine(get_num_interop_threads())
    return eng


def resize(n: int) -> None:
    """Restart the worker pool with n threads (after the queued work finishes)."""
    eng = _engine[0]
    if eng is not None:
        eng.stop()
        eng.n_threads = n


def new_var(name: str | None = None) -> Var:
    """A fresh engine variable."""
    return get_engine().new_var(name)


def push(fn, reads=(), writes=(), name: str = "kernel", info=None) -> None:
    """Push a kernel to the process-wide engine (see `Engine.push`)."""
    get_engine().push(fn, reads, writes, name, info)


def wait_for_var(var: Var, write: bool = False) -> None:
    """Wait until `var` may be read (or written, with write=True) by the caller."""
    get_engine().wait_for_var(var, write)


def wait_for_all() -> None:
    """Wait for every pushed kernel; raise the first kernel error since the last sync."""
    eng = _engine[0]
    if eng is not None:
        eng.wait_for_all()


def _reset_after_fork() -> None:
    # Worker threads do not survive fork(); a child process starts with a fresh engine.
    _engine[0] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
