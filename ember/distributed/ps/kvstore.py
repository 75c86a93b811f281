"""The worker side of the parameter server: `KVStore` with MXNet's verbs (see the package docstring)."""

from __future__ import annotations

import atexit
import sys
import time

import numpy as np

from ember.distributed import cluster, faults
from ember.distributed.errors import DistError
from ember.distributed.ps import protocol as P
from ember.distributed.ps.server import Server, serve
from ember.tensor import Tensor

_MODES = {"dist_sync": "sync", "dist_async": "async", "dist_sync_device": "sync", "dist_async_device": "async",
          "local": "sync", "device": "sync", "sync": "sync", "async": "async"}
_OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop", "adagrad": "Adagrad"}


def is_server() -> bool:
    """Whether this rank is a parameter server (one of the last `--servers` ranks)."""
    from ember.distributed.group import state

    if state.world is None:
        return False
    n = state.world.size()
    return cluster.task_of(state.world.rank(), n)[0] == "ps"


class _LocalLink:
    """A world of one: the worker talks to an in-process server."""

    def __init__(self, mode: str, max_staleness) -> None:
        self.replies: list = []
        self.server = Server(1, mode, max_staleness, lambda w, rep: self.replies.append(rep))
        self.servers = 1

    def send(self, s: int, msg) -> None:
        self.server.handle(msg)

    def receive(self, s: int):
        if not self.replies:
            raise DistError("parameter server: a request was not answered (a sync pull needs this worker's push)")
        return self.replies.pop(0)


class _MPILink:
    """Requests to the server ranks over a communicator of the store's own."""

    def __init__(self, comm, MPI, workers: int, servers: int) -> None:  # noqa: N803
        self.comm = comm
        self.MPI = MPI
        self.workers = workers
        self.servers = servers
        self.pending: list = []

    def send(self, s: int, msg) -> None:
        self.pending.append(self.comm.isend(msg, self.workers + s, P.REQUEST))
        if len(self.pending) > 64:
            self.pending = [r for r in self.pending if not r.Test()]

    def receive(self, s: int):
        src = self.workers + s
        wd = faults.current()
        since = time.monotonic()
        polls = 0
        while not self.comm.Iprobe(src, P.REPLY):
            if wd is not None:
                wd.check("parameter server request", {src}, since)
            polls += 1
            if polls > 2000:
                time.sleep(5e-5)
        return self.comm.recv(source=src, tag=P.REPLY)


class KVStore:
    """A worker's handle on the parameter server (MXNet's KVStore).

    Keys are ints or strings (or lists of them, with lists of values); values are tensors. Make one
    on every rank with `create`: on a server rank the call serves and then ends the process.
    """

    def __init__(self, mode: str = "dist_sync", max_staleness: int | None = None) -> None:
        from ember.distributed.group import init_process_group, new_group, state

        if mode not in _MODES:
            raise ValueError(f"KVStore: unknown type {mode!r}; use one of {sorted(_MODES)}")
        if max_staleness is not None and (not isinstance(max_staleness, int) or max_staleness < 0):
            raise ValueError(f"KVStore: max_staleness must be a non-negative int or None, got {max_staleness!r}")
        self.type = mode
        self._mode = _MODES[mode]
        if self._mode == "sync" and max_staleness is not None:
            raise ValueError("KVStore: max_staleness applies to the async modes only")
        if state.world is None:
            init_process_group()
        world = state.world
        n = world.size()
        servers = cluster.num_servers(n)
        self.num_workers = n - servers
        self._closed = False
        if servers == 0:
            if n > 1:
                raise RuntimeError(f"KVStore({mode!r}): no rank of this job is a server; start it with "
                                   f"ember run -n {n + 1} --servers 1 (the last --servers ranks serve)")
            self.rank = 0
            self._link = _LocalLink(self._mode, max_staleness)
            return
        transport = state.world_transport
        comm = transport.dup_comm()  # collective: every rank, servers too
        self._workers_group = new_group(list(range(self.num_workers)))
        job, index = cluster.task_of(world.rank(), n, servers)
        if job == "ps":
            serve(comm, transport.MPI, self.num_workers, self._mode, max_staleness)
            from ember.distributed.group import destroy_process_group

            destroy_process_group()
            sys.exit(0)  # a server's work ends with the workers' (MXNet's server processes do the same)
        self.rank = index
        self._link = _MPILink(comm, transport.MPI, self.num_workers, servers)
        atexit.register(self.close)

    # --- the verbs ------------------------------------------------------------------------------------
    def _pairs(self, key, value, what: str) -> list:
        if isinstance(key, (list, tuple)):
            values = value if isinstance(value, (list, tuple)) else None
            if values is None or len(values) != len(key):
                raise ValueError(f"{what}: give one value per key ({len(key)} keys)")
            return list(zip(key, values))
        return [(key, value)]

    def _server(self, key) -> int:
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise TypeError(f"KVStore: keys are ints or strings, got {type(key).__name__}")
        return P.server_of(key, self._link.servers)

    def _answers(self, asked: list, what: str) -> dict:
        """Wait for one reply per (server, key) asked; errors raise DistError."""
        got = {}
        for s, _key in asked:
            rep = self._link.receive(s)
            if rep[0] == "error":
                raise DistError(f"{what} on worker {self.rank}: {rep[1]}")
            got[(s, rep[1])] = rep[2]
        return got

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise DistError(f"{what}: the KVStore is closed")

    def init(self, key, value) -> None:
        """Give each key its initial value (worker 0's value is kept; the others wait until it is there)."""
        self._check_open("init")
        asked = []
        for k, v in self._pairs(key, value, "init"):
            s = self._server(k)
            self._link.send(s, (P.INIT, self.rank, k, _array(v, "init")))
            asked.append((s, k))
        self._answers(asked, "init")

    def push(self, key, value, priority: int = 0) -> None:
        """Send values (gradients) for keys; the servers sum (sync) or apply (async) them."""
        self._check_open("push")
        for k, v in self._pairs(key, value, "push"):
            self._link.send(self._server(k), (P.PUSH, self.rank, k, _array(v, "push")))

    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Fetch the keys' values into `out` (a tensor, or a list of them), waiting as the mode requires."""
        self._check_open("pull")
        if out is None:
            raise ValueError("pull: give out=, the tensor(s) the values are written into")
        pairs = self._pairs(key, out, "pull")
        asked = []
        for k, _ in pairs:
            s = self._server(k)
            self._link.send(s, (P.PULL, self.rank, k))
            asked.append((s, k))
        got = self._answers(asked, "pull")
        for (k, t), (s, _) in zip(pairs, asked):
            _write(t, got[(s, k)], k)

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """push then pull (into `out`, or back into `value`)."""
        self.push(key, value, priority)
        self.pull(key, out if out is not None else value, priority)

    def set_optimizer(self, optimizer, rescale_grad: float = 1.0, **options) -> None:
        """The update the servers apply: an ember.optim class (or 'sgd', 'adam', ...) and its options.

        Every worker calls it; worker 0's choice is sent. Pushed values are multiplied by rescale_grad first.
        """
        self._check_open("set_optimizer")
        if isinstance(optimizer, str):
            name = _OPTIMIZERS.get(optimizer.lower())
            if name is None:
                raise ValueError(f"set_optimizer: unknown optimizer {optimizer!r}; use one of {sorted(_OPTIMIZERS)} "
                                 "or an ember.optim class")
            spec = ("ember.optim", name, options)
        elif isinstance(optimizer, type):
            spec = (optimizer.__module__, optimizer.__qualname__, options)
        else:
            raise TypeError("set_optimizer: give an optimizer class (e.g. ember.optim.SGD) or its name, and its "
                            "options as keywords")
        if self.rank == 0:
            for s in range(self._link.servers):
                self._link.send(s, (P.OPTIMIZER, 0, spec, float(rescale_grad)))
            self._answers([(s, None) for s in range(self._link.servers)], "set_optimizer")
        self.barrier()

    def barrier(self) -> None:
        """Wait until every worker has reached the barrier (servers are not part of it)."""
        if isinstance(self._link, _MPILink):
            from ember.distributed.collectives import barrier

            barrier(group=self._workers_group)

    def close(self) -> None:
        """Tell the servers this worker is done (also done at exit); servers stop when all workers have."""
        if self._closed:
            return
        self._closed = True
        if isinstance(self._link, _MPILink):
            for s in range(self._link.servers):
                self._link.send(s, (P.CLOSE, self.rank))
            self._answers([(s, None) for s in range(self._link.servers)], "close")


def create(name: str = "local", max_staleness: int | None = None) -> KVStore:
    """A KVStore: 'dist_sync', 'dist_async' (with an optional max_staleness), or 'local' (in this process)."""
    return KVStore(name, max_staleness)


def _array(v, what: str) -> np.ndarray:
    if isinstance(v, Tensor):
        v._require_data(what)
        return np.array(v._device.backend.to_host(v._data), copy=True)
    return np.asarray(v)


def _write(t, value: np.ndarray, key) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"pull: out must be tensors, got {type(t).__name__} for key {key!r}")
    if tuple(t.shape) != value.shape:
        raise ValueError(f"pull: key {key!r} holds shape {value.shape}, out has shape {tuple(t.shape)}")
    from ember.autograd.grad_mode import no_grad

    with no_grad():
        t.copy_(Tensor._make(t._device.backend.from_host(value.astype(t._data.dtype, copy=False)), t._device))
