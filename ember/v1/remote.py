"""Graphs split across processes: parts of an ember.v1 graph placed on `/job:ps/task:0`-style devices
run in those processes, and their send/recv pairs travel over MPI.

The placement pass cuts the graph into one part per device, as it does inside one process
(ember.graph.placement). A `ProcessPlan` runs this process's parts on threads, as a PlacedPlan does,
and ships every other part once to the process that owns its device (a `register` message: nodes,
with ops named by their registered names and variables by their names), then asks it to run that
part at every `Session.run` (`run`, with a run number). The rendezvous of a run (`MPIRendezvous`)
routes the keys whose other end is in another process over MPI; messages carry (client, plan, run,
key), so a late message of an aborted run is never taken for a new one. A process serves others'
parts in `serve()` (`tf.train.Server.join()`), one thread per client, until every worker has said
goodbye. Variables placed on a serving process live there, one per name, shared by every worker's
graph: between-graph replication.
"""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
import time

import numpy as np

from ember.device import Device
from ember.distributed import _env, cluster, faults
from ember.distributed.errors import DistError
from ember.graph import placement_exec
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, Graph, Value
from ember.graph.placement import RECV_PART, SEND_PART, SIGNAL_PART, WAIT_PART, Part
from ember.graph.placement_exec import PlacedPlan, part_plan
from ember.op import OPS
from ember.runtime.rendezvous import RECV_TIMEOUT, Cancelled, Rendezvous
from ember.v1.errors import FailedPreconditionError

CONTROL, REPLY, DATA = 21, 22, 23
_PART_OPS = {"send": SEND_PART, "recv": RECV_PART, "send_control": SIGNAL_PART, "recv_control": WAIT_PART}


# --- which process is which ------------------------------------------------------------------------
_declared: list = [None]  # (job, task) given by tf.train.Server


def declare_task(job: str, task: int) -> None:
    """This process is /job:<job>/task:<task> (tf.train.Server says so)."""
    _declared[0] = (job, int(task))


def local_task() -> tuple | None:
    """(job, task) of this process: from tf.train.Server, else from its rank under a launcher, else None."""
    if _declared[0] is not None:
        return _declared[0]
    from ember.distributed.group import state

    if state.world is not None and state.world.size() > 1:
        return cluster.task_of(state.world.rank(), state.world.size())
    launched = _env.launched()
    if launched is not None and launched[0] > 1:
        return cluster.task_of(launched[1], launched[0])
    return None


def resolve_device(spec) -> Device:
    """A device name with a job: this process's own devices become local ones (/job:worker/task:1 -> cpu).

    A name without a task (`/job:worker`, replica_device_setter's default worker_device) means this
    process's own task when it belongs to that job, as TensorFlow fills a partial device name from the
    session's task; otherwise task 0.
    """
    dev = Device(spec)
    if dev.job is None:
        return dev
    me = local_task()
    if me is not None and me[0] == dev.job and not _names_task(str(spec)):
        return Device(f"{dev.type}:{dev.index}")
    if me == (dev.job, dev.task):
        return Device(f"{dev.type}:{dev.index}")
    return dev


def _names_task(spec: str) -> bool:
    """Whether a device name says which task (`/job:ps/task:1`), not only the job (`/job:ps`)."""
    return any(part.strip().lower().startswith("task:") for part in spec.split("/"))


def _rank_of(dev: Device) -> int:
    rt = runtime()
    return cluster.rank_of(dev.job, dev.task, rt.size)


# --- the per-process runtime ------------------------------------------------------------------------
class _Runtime:
    """The communicator of distributed graphs and the mail that arrived on it."""

    def __init__(self, comm, MPI) -> None:  # noqa: N803
        self.comm = comm
        self.MPI = MPI
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.mail: dict = {}  # (client, plan, run, key) -> value
        self.replies: dict = {}  # (kind, a, b) -> message, for this process as a client
        self.cond = threading.Condition()
        self.pump_lock = threading.Lock()
        self.sends: list = []
        self.send_lock = threading.Lock()
        self.plan_ids = itertools.count()
        self.run_lock = threading.Lock()  # this process runs one distributed plan at a time
        self.query_ids = itertools.count()
        self.peers_used: set = set()
        self.pid = os.getpid()

    def send(self, dest: int, tag: int, obj) -> None:
        """Send a (pickled) message; the request is kept until it completes."""
        with self.send_lock:
            self.sends.append(self.comm.isend(obj, dest, tag))
            if len(self.sends) > 32:
                self.sends = [r for r in self.sends if not r.Test()]

    def pump(self) -> None:
        """Move the data and replies that have arrived into the mailboxes (one thread at a time)."""
        if not self.pump_lock.acquire(blocking=False):
            return
        try:
            status = self.MPI.Status()
            got = False
            for tag in (DATA, REPLY):  # control messages are left to serve()
                while self.comm.Iprobe(self.MPI.ANY_SOURCE, tag, status):
                    source = status.Get_source()
                    msg = self.comm.recv(source=source, tag=tag)
                    with self.cond:
                        if tag == DATA:
                            client, plan, run, key, value = msg
                            self.mail[(client, plan, run, key)] = value
                        else:
                            self.replies[msg[0], msg[1], msg[2], source] = msg
                    got = True
            if got:
                with self.cond:
                    self.cond.notify_all()
        finally:
            self.pump_lock.release()

    def drop_runs_before(self, client: int, plan: int, run: int) -> None:
        """Forget data of earlier runs of a plan (what an aborted run left behind)."""
        with self.cond:
            for k in [k for k in self.mail if k[0] == client and k[1] == plan and k[2] < run]:
                del self.mail[k]

    def wait(self, test, what: str, peers, since: float, timeout: float = RECV_TIMEOUT, abort=None):
        """Pump and wait until test() returns something other than None; failed peers raise."""
        wd = faults.current()
        deadline = since + timeout
        pause = 1e-5
        while True:
            with self.cond:
                got = test()
            if got is not None:
                return got
            if abort is not None:
                abort()
            if wd is not None:
                wd.check(what, peers, since)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: nothing arrived within {timeout:g} s")
            self.pump()
            with self.cond:
                self.cond.wait(pause)
            pause = min(pause * 2, 1e-3)


_rt: list = [None]


def start() -> None:
    """Make this process's runtime (collective: every rank of the job calls it, e.g. in tf.train.Server)."""
    if _rt[0] is not None:
        return
    from ember.distributed.group import init_process_group, state

    if state.world is None:
        init_process_group()
    t = state.world_transport
    if t.kind != "mpi":
        return  # a world of one: nothing is remote
    _rt[0] = _Runtime(t.dup_comm(), t.MPI)
    atexit.register(_goodbye)


def runtime() -> _Runtime:
    """The started runtime; a clear error when tf.train.Server was not created."""
    rt = _rt[0]
    if rt is None:
        raise DistError("this graph places ops in other processes: create tf.train.Server(...) on every rank first "
                        "(it connects the processes), and run the program with ember run -n N --servers S")
    return rt


def _goodbye() -> None:
    """At exit: tell every process this one may have asked for work that it is done."""
    rt = _rt[0]
    if rt is None or rt.pid != os.getpid() or faults.current() is None:
        return
    for r in range(rt.size):
        if r != rt.rank:
            rt.send(r, CONTROL, ("bye", rt.rank))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(r.Test() for r in rt.sends):
        time.sleep(1e-3)


# --- the client side: a plan whose parts run in several processes ------------------------------------
class MPIRendezvous(Rendezvous):
    """A run's rendezvous: keys whose other end is in another process go over MPI, the others stay here."""

    def __init__(self, rt: _Runtime, client: int, plan: int, run: int, routes: dict, failed=None) -> None:
        super().__init__()
        self.rt = rt
        self.client, self.plan, self.run = client, plan, run
        self.routes = routes  # key -> peer rank
        self.failed = failed  # () -> raises when a peer's part of this run failed (client side)

    def put(self, key: str, value) -> None:
        peer = self.routes.get(key)
        if peer is None:
            return super().put(key, value)
        if self._aborted is not None:
            raise Cancelled(f"send {key}: the run was cancelled ({self._aborted!r})")
        self.rt.send(peer, DATA, (self.client, self.plan, self.run, key, value))

    def take(self, key: str, src=None):
        peer = self.routes.get(key)
        if peer is None:
            return super().take(key, src)
        box = (self.client, self.plan, self.run, key)

        def test():
            return (self.rt.mail.pop(box),) if box in self.rt.mail else None

        def abort():
            if self._aborted is not None:
                raise Cancelled(f"recv {key}: the run was cancelled ({self._aborted!r})")
            if self.failed is not None:
                self.failed()

        return self.rt.wait(test, f"recv {key} from {src}", {peer}, time.monotonic(), self.timeout, abort)[0]


def _routes(parts: dict, here: set) -> dict:
    """key -> peer rank, for the send/recv (and control) ends in `here`'s parts whose other end is elsewhere."""
    routes = {}
    for dev, part in parts.items():
        if dev not in here:
            continue
        for node in part.graph.nodes:
            other = None
            if node.op is SEND_PART or node.op is SIGNAL_PART:
                other = node.attrs["dst"]
            elif node.op is RECV_PART or node.op is WAIT_PART:
                other = node.attrs["src"]
            if other is not None and other.job is not None:
                routes[node.attrs["key"]] = _rank_of(other)
    return routes


class ProcessPlan(PlacedPlan):
    """A PlacedPlan whose parts on other processes' devices run there (see the module docstring)."""

    def __init__(self, graph, outputs, extra_nodes=()) -> None:
        self.rt = runtime()
        super().__init__(graph, outputs, extra_nodes)
        self.id = next(self.rt.plan_ids)
        self.remote: dict = {}  # rank -> [devices]
        for dev in self.parts:
            if dev.job is not None:
                rank = _rank_of(dev)
                if rank == self.rt.rank:
                    raise DistError(f"the graph places ops on {dev}, which is this process (rank {rank}); build the "
                                    "graph after creating tf.train.Server, so the process knows its own devices")
                self.remote.setdefault(rank, []).append(dev)
        self.routes = _routes(self.parts, set(self.plans))
        self.registered = False
        self.runs = 0

    def runs_here(self, dev) -> bool:
        return dev.job is None

    def _register(self) -> None:
        for rank, devices in self.remote.items():
            payload = [encode_part(self.parts[d], d, local_task()) for d in devices]
            self.rt.send(rank, CONTROL, ("register", self.rt.rank, self.id, payload))
        self.registered = True

    def run(self, feeds: dict, *, memory: bool | None = None, parallel=None) -> list:
        rt = self.rt
        with rt.run_lock:
            if not self.registered:
                self._register()
            self.runs += 1
            run = self.runs
            me = rt.rank
            for rank, devices in self.remote.items():
                part_feeds = [{pv.node.id: feeds[v] for v, pv in self.parts[d].feeds.items() if v in feeds}
                              for d in devices]
                rt.send(rank, CONTROL, ("run", me, self.id, run, part_feeds))
                rt.peers_used.add(rank)
            remote_ranks = set(self.remote)

            def failed():
                for rank in remote_ranks:
                    rep = rt.replies.get(("failed", self.id, run, rank))
                    if rep is not None:
                        raise Cancelled(f"{rep[3]} failed")

            rv = MPIRendezvous(rt, me, self.id, run, self.routes, failed)
            try:
                local = self.run_parts(rv, feeds)
            except BaseException as e:
                for rank in remote_ranks:
                    rt.send(rank, CONTROL, ("abort", me, self.id, run))
                replies = self._replies(run, remote_ranks)
                self._raise_remote(replies, prefer_remote=isinstance(e, Cancelled) or isinstance(e.__cause__,
                                                                                                 Cancelled))
                raise
            replies = self._replies(run, remote_ranks)
            self._raise_remote(replies)
        out: list = [None] * len(self.outputs)
        for dev, arrays in local.items():
            for i, a in zip(self.parts[dev].out_index, arrays):
                out[i] = a
        for rank, devices in self.remote.items():
            for dev, arrays in zip(devices, replies[rank][4]):
                for i, a in zip(self.parts[dev].out_index, arrays):
                    out[i] = a
        return out

    def _replies(self, run: int, ranks: set) -> dict:
        """Each remote process's answer for this run ("done" with its outputs, or "failed")."""
        rt = self.rt
        got: dict = {}
        since = time.monotonic()
        for rank in ranks:
            def test(rank=rank):
                for kind in ("done", "failed"):
                    rep = rt.replies.pop((kind, self.id, run, rank), None)
                    if rep is not None:
                        return rep
                return None

            got[rank] = rt.wait(test, f"Session.run (waiting for rank {rank})", {rank}, since)
        with rt.cond:
            for k in [k for k in rt.replies if k[1] == self.id and k[2] < run]:
                del rt.replies[k]
        return got

    def _raise_remote(self, replies: dict, prefer_remote: bool = True) -> None:
        """Raise the first remote failure that is not itself a cancellation (as the error type it was)."""
        failures = [rep for rep in replies.values() if rep[0] == "failed"]
        real = [rep for rep in failures if not rep[4][3]]
        if not failures or (not real and not prefer_remote):
            return
        rep = (real or failures)[0]
        module, name, message, _cancelled = rep[4]
        raise _rebuild_error(module, name, f"{message} (on {rep[3]})")


def _rebuild_error(module: str, name: str, message: str) -> BaseException:
    if module.startswith("ember."):
        import importlib

        cls = getattr(importlib.import_module(module), name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(message)
            except TypeError:
                pass
    return RuntimeError(f"{name}: {message}")


# --- shipping a part ---------------------------------------------------------------------------------------
def _op_ref(node, dev) -> tuple:
    for name, op in _PART_OPS.items():
        if node.op is op:
            return ("part", name)
    if OPS.get(node.op.name) is node.op:
        return ("op", node.op.name)
    raise DistError(f"{node.op.name} (node %{node.id}) cannot run on {dev}: only registered ops can be sent to "
                    "another process")


def _encode(x, me: tuple):
    if isinstance(x, Device):  # a device of this process, as the other process must name it
        if x.job is None:
            return Device(f"/job:{me[0]}/task:{me[1]}/{x.type}:{x.index}")
        return x
    if hasattr(x, "spec_shape") and hasattr(x, "op_name"):  # a Variable (and variables.py asks this module)
        return ("__variable__", x.op_name, tuple(x.spec_shape), np.dtype(x.spec_dtype).str)
    if isinstance(x, dict):
        return {k: _encode(v, me) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_encode(v, me) for v in x)
    return x


def encode_part(part: Part, dev: Device, me: tuple) -> dict:
    """A part as plain data: its nodes (ops by registered name, variables by name) and outputs."""
    nodes = []
    for n in part.graph.nodes:
        ins = [("v", x.node.id, x.index) if isinstance(x, Value) else ("c", x) for x in n.inputs]
        outs = [(tuple(v.shape), v.dtype.str) for v in n.outputs]
        kind, attrs, op = n.kind, n.attrs, None
        if kind == CAPTURE:  # an outside tensor of this process: its value now
            t = n.attrs["tensor"]
            kind, attrs = CONSTANT, {"value": np.array(t._device.backend.to_host(t._data), copy=True)}
        elif kind == "op":
            op = _op_ref(n, dev)
        elif kind == VARIABLE:
            attrs = {"variable": _encode(n.attrs["variable"], me)}
        nodes.append((n.id, kind, op, ins, _encode(attrs, me), outs, [c.id for c in n.control_inputs], n.name))
    return {"device": str(dev), "nodes": nodes, "outputs": [(v.node.id, v.index) for v in part.outputs],
            "out_index": list(part.out_index)}


# --- the serving side ------------------------------------------------------------------------------------
class ServerVariable:
    """The storage of a variable placed on this process, shared by every worker's graph (by name)."""

    def __init__(self, name: str, shape: tuple, dtype, device: Device) -> None:
        self.op_name = name
        self.spec_shape = tuple(shape)
        self.spec_dtype = np.dtype(dtype)
        self.storage_device = device
        self._storage = None
        self._lock = threading.Lock()

    def read_storage(self):
        if self._storage is None:
            raise FailedPreconditionError(f"Attempting to use uninitialized value {self.op_name}")
        return self._storage

    def write(self, xp, value, mode: str = "set"):
        with self._lock:
            if mode == "set":
                if self._storage is None or tuple(self._storage.shape) != tuple(value.shape):
                    self._storage = xp.array(value, dtype=self.spec_dtype, copy=True)
                else:
                    xp.copyto(self._storage, value, casting="unsafe")
                return self._storage
            if self._storage is None:
                    raise FailedPreconditionError(f"Attempting to use uninitialized value {self.op_name}")
            (xp.add if mode == "add" else xp.subtract)(self._storage, value, out=self._storage, casting="unsafe")
            return self._storage

    def is_initialized_now(self) -> bool:
        return self._storage is not None


class _Served(PlacedPlan):
    """The parts one client shipped here, rebuilt as graphs of this process's devices."""

    def __init__(self, rt: _Runtime, client: int, payload: list, variables: dict, me: tuple) -> None:
        self.rt = rt
        self.client = client
        self.parts = {}
        self.devices = []
        for entry in payload:
            dev, part = _decode_part(entry, variables, me, client)
            self.parts[dev] = part
            self.devices.append(dev)
        self.plans = {dev: part_plan(dev, part) for dev, part in self.parts.items()}
        self.routes = _routes(self.parts, set(self.parts))


def _local(dev: Device, me: tuple) -> Device:
    if dev.job is not None and (dev.job, dev.task) == me:
        return Device(f"{dev.type}:{dev.index}")
    return dev


def _decode(x, variables: dict, dev: Device, me: tuple, client: int):
    if isinstance(x, Device):
        return _local(x, me)
    if isinstance(x, tuple) and len(x) == 4 and x[0] == "__variable__":
        _, name, shape, dtype = x
        var = variables.get(name)
        if var is None:
            var = variables[name] = ServerVariable(name, shape, dtype, dev)
        elif var.spec_shape != tuple(shape) or var.spec_dtype != np.dtype(dtype):
            raise DistError(f"variable {name!r}: rank {client}'s graph has shape {tuple(shape)} {np.dtype(dtype).name}, "
                            f"but it exists here with {var.spec_shape} {var.spec_dtype.name}")
        return var
    if isinstance(x, dict):
        return {k: _decode(v, variables, dev, me, client) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_decode(v, variables, dev, me, client) for v in x)
    return x


def _decode_part(entry: dict, variables: dict, me: tuple, client: int) -> tuple:
    dev = _local(Device(entry["device"]), me)
    g = Graph(f"rank{client}@{dev}")
    nodes: dict = {}
    for nid, kind, op, ins, attrs, outs, controls, name in entry["nodes"]:
        attrs = _decode(attrs, variables, dev, me, client)
        if kind == PLACEHOLDER:
            shape, dtype = outs[0]
            g.placeholder(shape, dtype, dev, name=name)
        elif kind == CONSTANT:
            g.constant(attrs["value"], dev, name=name)
        elif kind == VARIABLE:
            g.variable(attrs["variable"], name=name)
        else:
            real = _PART_OPS[op[1]] if op[0] == "part" else OPS[op[1]]
            inputs = [nodes[i[1]].outputs[i[2]] if i[0] == "v" else i[1] for i in ins]
            g.add_op(real, inputs, attrs, dev, name=name)
        node = g.nodes[-1]
        node.control_inputs = [nodes[c] for c in controls]
        nodes[nid] = node
    part = Part(dev, g)
    part.graph = g
    part.outputs = [nodes[nid].outputs[i] for nid, i in entry["outputs"]]
    part.out_index = list(range(len(part.outputs)))
    part.placeholder_ids = {nid: nodes[nid].outputs[0] for nid, kind, *_ in entry["nodes"] if kind == PLACEHOLDER}
    part.feeds = {v: v for v in part.placeholder_ids.values()}  # fed by their own values (see serve)
    return dev, part


def serve() -> None:
    """Run the parts other processes send here until every worker has said goodbye (tf.train.Server.join)."""
    rt = runtime()
    me = local_task()
    from ember.distributed.group import state

    size = state.world.size()
    workers = {r for r in range(size) if cluster.task_of(r, size)[0] == "worker" and r != rt.rank}
    left: set = set()
    served: dict = {}  # (client, plan) -> _Served
    variables: dict = {}
    active: dict = {}  # (client, plan, run) -> MPIRendezvous
    queues: dict = {}  # client -> Queue of runs
    status = rt.MPI.Status()
    wd = faults.current()
    since = time.monotonic()

    def runner(client: int, q: queue.Queue) -> None:
        while True:
            job = q.get()
            if job is None:
                return
            plan_id, run, feeds = job
            plan = served[(client, plan_id)]
            rt.drop_runs_before(client, plan_id, run)
            rv = MPIRendezvous(rt, client, plan_id, run, plan.routes)
            active[(client, plan_id, run)] = rv
            try:
                part_feeds = {}
                for dev, fed in zip(plan.devices, feeds):
                    for nid, arr in fed.items():
                        part_feeds[plan.parts[dev].placeholder_ids[nid]] = arr
                results = plan.run_parts(rv, part_feeds)
                outs = [results.get(dev, []) for dev in plan.devices]
                rt.send(client, REPLY, ("done", plan_id, run, f"/job:{me[0]}/task:{me[1]}", outs, rt.rank))
            except BaseException as e:  # noqa: BLE001 - sent to the client, which raises it
                cancelled = isinstance(e, Cancelled) or isinstance(e.__cause__, Cancelled)
                cause = e.__cause__ if type(e) is RuntimeError and e.__cause__ is not None else e
                info = (type(cause).__module__, type(cause).__qualname__, str(e), cancelled)
                rt.send(client, REPLY, ("failed", plan_id, run, f"/job:{me[0]}/task:{me[1]}", info, rt.rank))
            finally:
                active.pop((client, plan_id, run), None)

    for r in range(size):  # a worker that serves will not say goodbye before the end: nobody waits for it
        if r != rt.rank:
            rt.send(r, CONTROL, ("serving", rt.rank))
    try:
        while not workers <= left:
            if not rt.comm.Iprobe(rt.MPI.ANY_SOURCE, CONTROL, status):
                rt.pump()
                if wd is not None:
                    wd.check("tf.train.Server.join", None, since)
                time.sleep(2e-4)
                continue
            msg = rt.comm.recv(source=status.Get_source(), tag=CONTROL)
            verb, client = msg[0], msg[1]
            if verb == "register":
                served[(client, msg[2])] = _Served(rt, client, msg[3], variables, me)
            elif verb == "run":
                q = queues.get(client)
                if q is None:
                    q = queues[client] = queue.Queue()
                    threading.Thread(target=runner, args=(client, q), daemon=True,
                                     name=f"ember-serve-rank{client}").start()
                q.put((msg[2], msg[3], msg[4]))
            elif verb == "abort":
                rv = active.get((client, msg[2], msg[3]))
                if rv is not None:
                    rv.abort(Cancelled(f"rank {client} aborted the run"))
            elif verb == "query":
                names = msg[3]
                rt.send(client, REPLY, ("answer", msg[2], None, [n in variables and variables[n].is_initialized_now()
                                                                  for n in names]))
            elif verb in ("bye", "serving"):
                left.add(client)
    finally:
        for q in queues.values():
            q.put(None)


def variables_initialized(variables: list) -> list:
    """Whether each variable (placed on other processes) holds a value, asked of the processes holding them."""
    rt = runtime()
    by_rank: dict = {}
    for i, v in enumerate(variables):
        by_rank.setdefault(_rank_of(v.storage_device), []).append(i)
    result = [False] * len(variables)
    for rank, idx in by_rank.items():
        qid = next(rt.query_ids)
        rt.send(rank, CONTROL, ("query", rt.rank, qid, [variables[i].op_name for i in idx]))
        rep = rt.wait(lambda qid=qid, rank=rank: rt.replies.pop(("answer", qid, None, rank), None),
                      "report_uninitialized_variables", {rank}, time.monotonic())
        for i, ok in zip(idx, rep[3]):
            result[i] = bool(ok)
    return result


placement_exec.process_plan[0] = ProcessPlan
