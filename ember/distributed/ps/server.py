"""The server side of the parameter server: the values of its keys, the optimizer, and when to answer.

`Server.handle` takes one request and answers through `send(worker, reply)`, at once or later (a
pull may wait for a round to complete, or for slow workers in bounded-staleness mode). `serve` runs
a Server over MPI until every worker has closed; in a world of one the worker calls it directly.
"""

from __future__ import annotations

import importlib
import time

import numpy as np

from ember.distributed.ps import protocol as P


class _Entry:
    """One key on this server: its value (as a tensor the optimizer updates) and the round's bookkeeping."""

    def __init__(self, value: np.ndarray) -> None:
        from ember.tensor import Tensor

        self.param = Tensor._make(np.array(value, copy=True), _cpu())
        if self.param._data.dtype.kind == "f":
            self.param.requires_grad_(True)
        self.optimizer = None
        self.version = 0  # updates applied
        self.acc = None  # sync: the sum of this round's pushes
        self.count = 0
        self.clock: dict = {}  # worker -> pushes received
        self.queued: list = []  # sync: pushes of workers already ahead of the current round
        self.pulls: list = []  # (worker, its push count when it asked) waiting for a reply


def _cpu():
    from ember.device import as_device

    return as_device("cpu")


def make_optimizer(spec, param):
    """An Ember optimizer over [param] from a (module, class name, options) spec."""
    module, name, options = spec
    cls = getattr(importlib.import_module(module), name)
    return cls([param], **options)


class Server:
    """Keys, values and the sync/async rules of one server."""

    def __init__(self, workers: int, mode: str, max_staleness, send) -> None:
        self.workers = workers
        self.mode = mode
        self.max_staleness = max_staleness
        self.send = send
        self.entries: dict = {}
        self.waiting_init: dict = {}  # key -> workers waiting for worker 0's value
        self.spec = None
        self.rescale = 1.0
        self.closed: set = set()
        self.errors: dict = {}  # worker -> an error to report with its next reply

    @property
    def done(self) -> bool:
        return len(self.closed) == self.workers

    def _reply(self, w: int, key, value=None) -> None:
        err = self.errors.pop(w, None)
        self.send(w, ("error", err) if err is not None else ("ok", key, value))

    def handle(self, msg: tuple) -> None:
        verb, w = msg[0], msg[1]
        if verb == P.INIT:
            self._init(w, msg[2], msg[3])
        elif verb == P.OPTIMIZER:
            self.spec, self.rescale = msg[2], msg[3]
            for e in self.entries.values():
                e.optimizer = None  # made afresh with the new rule
            self._reply(w, None)
        elif verb == P.PUSH:
            self._push(w, msg[2], msg[3])
        elif verb == P.PULL:
            self._pull(w, msg[2])
        elif verb == P.CLOSE:
            self.closed.add(w)
            self._reply(w, None)
            for key, e in self.entries.items():  # a finished worker no longer holds the others back
                self._answer_pulls(key, e)
        else:
            raise ValueError(f"parameter server: unknown request {verb!r}")

    def _init(self, w: int, key, value) -> None:
        if w == 0 and key not in self.entries:
            self.entries[key] = _Entry(value)
            for waiting in self.waiting_init.pop(key, []):
                self._reply(waiting, key)
        if key in self.entries:
            self._reply(w, key)
        else:
            self.waiting_init.setdefault(key, []).append(w)

    def _entry(self, w: int, key, what: str):
        e = self.entries.get(key)
        if e is None:
            self.errors[w] = f"{what}: key {key!r} was never initialised (call init on every worker first)"
        return e

    def _push(self, w: int, key, grad) -> None:
        e = self._entry(w, key, "push")
        if e is None:
            return
        if grad.shape != e.param.shape:
            self.errors[w] = (f"push: key {key!r} holds shape {tuple(e.param.shape)}, worker {w} pushed shape "
                              f"{tuple(grad.shape)}")
            return
        e.clock[w] = e.clock.get(w, 0) + 1
        if self.mode == "async":
            self._update(e, grad)
        elif e.clock[w] > e.version + 1:
            e.queued.append((w, grad))  # ahead of the round being summed: kept for its own round
        else:
            self._add(e, grad)
        self._answer_pulls(key, e)

    def _add(self, e: _Entry, grad) -> None:
        e.acc = np.array(grad, copy=True) if e.acc is None else np.add(e.acc, grad, out=e.acc)
        e.count += 1
        if e.count == self.workers:
            acc, e.acc, e.count = e.acc, None, 0
            self._update(e, acc)
            ahead, e.queued = e.queued, []
            for w, g in ahead:
                if e.clock[w] > e.version + 1:
                    e.queued.append((w, g))
                else:
                    self._add(e, g)

    def _update(self, e: _Entry, grad) -> None:
        from ember.autograd.grad_mode import no_grad
        from ember.tensor import Tensor

        p = e.param
        if self.spec is None:  # no optimizer: the value is what was pushed (summed over the round in sync mode)
            np.copyto(p._data, grad, casting="unsafe")
        else:
            if e.optimizer is None:
                e.optimizer = make_optimizer(self.spec, p)
            g = grad * self.rescale if self.rescale != 1.0 else grad
            p.grad = Tensor._make(np.asarray(g, dtype=p._data.dtype), p._device)
            with no_grad():
                e.optimizer.step()
        p._version[0] += 1
        e.version += 1

    def _ready(self, e: _Entry, w: int, mine: int) -> bool:
        """Whether a pull of worker w, made after its `mine`-th push, may be answered now."""
        if self.mode == "sync":
            return e.version >= mine
        if self.max_staleness is None:
            return True
        active = [e.clock.get(v, 0) for v in range(self.workers) if v not in self.closed and v != w]
        return not active or min(active) >= mine - self.max_staleness

    def _pull(self, w: int, key) -> None:
        e = self._entry(w, key, "pull")
        if e is None:
            self._reply(w, key)
            return
        e.pulls.append((w, e.clock.get(w, 0)))  # it must see the worker's pushes made before it, not later ones
        self._answer_pulls(key, e)

    def _answer_pulls(self, key, e: _Entry) -> None:
        waiting, e.pulls = e.pulls, []
        for w, mine in waiting:
            if w in self.errors or self._ready(e, w, mine):
                self._reply(w, key, np.array(e.param._data, copy=True))
            else:
                e.pulls.append((w, mine))


def serve(comm, MPI, workers: int, mode: str, max_staleness) -> None:  # noqa: N803
    """Answer requests on `comm` until every worker has closed (a failed worker raises DistBackendError)."""
    from ember.distributed import faults

    sends: list = []
    server = Server(workers, mode, max_staleness, lambda w, rep: sends.append(comm.isend(rep, w, P.REPLY)))
    status = MPI.Status()
    wd = faults.current()
    idle = 0
    since = time.monotonic()
    while not server.done:
        if comm.Iprobe(MPI.ANY_SOURCE, P.REQUEST, status):
            server.handle(comm.recv(source=status.Get_source(), tag=P.REQUEST))
            idle = 0
            if len(sends) > 64:
                sends[:] = [r for r in sends if not r.Test()]
            continue
        if wd is not None:
            wd.check("parameter server", None, since)
        idle += 1
        if idle > 200:
            time.sleep(min(1e-3, 1e-5 * idle))
    MPI.Request.Waitall(sends)
