"""Placement: cut a graph whose nodes live on several devices into one graph per device.

The graph builder puts a send/recv pair (ember.ops.transfer_ops) on every edge between devices.
`partition` cuts the needed nodes at those pairs: in the source device's part the send hands its
value to the run's rendezvous, in the destination's part the recv (now without inputs) takes it
from there and copies it. A control dependency between devices becomes a signal/wait pair the
same way. Each part is an ordinary graph in the original order, run by its own executor Plan
(see ember.graph.placement_exec).
"""

from __future__ import annotations

from ember.backends.meta import MetaArray
from ember.device import Device
from ember.graph.ir import PLACEHOLDER, GNode, Graph, Value
from ember.graph.passes.rewrite import Rewriter
from ember.op import Op
from ember.ops.transfer_ops import copy_array, recv_op, send_op
from ember.runtime.rendezvous import current


# --- the ops of a part's boundary (kernels meet through the run's rendezvous) ---------------------
class _SendPart(Op):
    name = "send"
    differentiable = False
    stateful = True  # it hands a value over exactly once per run: never recompute or drop it

    def infer(self, x, key, dst):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, key, dst):
        current().put(key, x)
        return x


class _RecvPart(Op):
    name = "recv"
    differentiable = False
    stateful = True

    def infer(self, key, src, dst, shape, dtype):
        return MetaArray(shape, dtype)

    def kernel(self, xp, key, src, dst, shape, dtype):
        return copy_array(current().take(key, src), src, dst)


class _SignalPart(Op):
    """A control dependency leaving this device: runs after its control input, tells the waiter."""

    name = "send_control"
    n_outputs = 0
    stateful = True

    def infer(self, key, dst):
        return ()

    def kernel(self, xp, key, dst):
        current().put(key, None)
        return ()


class _WaitPart(Op):
    """A control dependency arriving on this device: what depends on it runs after the signal."""

    name = "recv_control"
    n_outputs = 0
    stateful = True

    def infer(self, key, src):
        return ()

    def kernel(self, xp, key, src):
        current().take(key, src)
        return ()


SEND_PART, RECV_PART, SIGNAL_PART, WAIT_PART = _SendPart(), _RecvPart(), _SignalPart(), _WaitPart()


# --- devices ---------------------------------------------------------------------------------
def node_device(node: GNode, default: Device | None = None) -> Device | None:
    """Where a node runs: its outputs' device; without outputs, its first input's or control input's."""
    if node.outputs:
        return node.outputs[0].device
    for x in node.inputs:
        if isinstance(x, Value):
            return x.device
    for c in node.control_inputs:
        d = node_device(c)
        if d is not None:
            return d
    return default


def devices_of(nodes) -> set:
    """The devices the values of `nodes` live on."""
    return {v.device for n in nodes for v in n.outputs}


class Part:
    """One device's share of a placed graph: its graph, which outputs it makes, which placeholders it reads."""

    def __init__(self, device: Device, source: Graph) -> None:
        self.device = device
        self._rw = Rewriter(source)
        self.graph = self._rw.graph
        self.graph.name = f"{source.name}@{device}"
        self.outputs: list = []  # this part's Values of the requested outputs
        self.out_index: list = []  # position of each in the requested outputs
        self.feeds: dict = {}  # original placeholder Value -> this part's placeholder
        self.origin: dict = {}  # part node id -> original node (errors name the original)

    def __repr__(self) -> str:
        return f"<part {self.device}: {len(self.graph)} nodes>"


def _fail(msg: str):
    raise AssertionError(f"partition: {msg}")


def partition(graph: Graph, outputs, extra_nodes=()) -> dict:
    """Split the nodes `outputs` (and `extra_nodes`) need into one Part per device, cut at send/recv pairs."""
    outputs = list(outputs)
    for v in outputs:
        if not isinstance(v, Value):
            raise TypeError(f"cannot fetch {v!r}: not a graph value")
    nodes = graph.needed_for(outputs + list(extra_nodes))
    home = next((n.outputs[0].device for n in nodes if n.outputs), None) or Device("cpu")
    parts: dict = {}
    where: dict = {}  # original node id -> device
    waits: dict = {}  # (control input id, device) -> wait node in that device's part
    received: set = set()  # keys of the recv nodes cut so far
    for node in nodes:
        dev = node_device(node, home)
        where[node.id] = dev
        part = parts.get(dev)
        if part is None:
            part = parts[dev] = Part(dev, graph)
        rw = part._rw
        controls = [_wait_for(c, node, dev, parts, where, waits) for c in node.control_inputs if where[c.id] is not dev]
        if node.kind == "op" and node.op is recv_op:
            if node.attrs["key"] in received:
                _fail(f"two recv nodes take key {node.attrs['key']!r}; each send/recv pair needs its own key")
            received.add(node.attrs["key"])
            new = _cut_recv(node, dev, where, part)
        else:
            for x in node.value_inputs():
                if where[x.node.id] is not dev:
                    _fail(
                        f"{node.op_name} (node %{node.id}) on {dev} reads %{x.node.id} ({x.node.op_name}) on "
                        f"{where[x.node.id]} directly; every edge between devices must go through a send/recv pair"
                    )
            if node.kind == "op" and node.op is send_op:
                rw.add_op(SEND_PART, [rw.value(node.inputs[0])], dict(node.attrs), dev)
                new = part.graph.nodes[-1]
                rw.alias(node.outputs[0], new.outputs[0])
                rw.nmap[node] = new
            else:
                new = rw.copy(node)
        new.control_inputs = [rw.nmap[c] for c in node.control_inputs if where[c.id] is dev] + controls
        part.origin[new.id] = node
        if node.kind == PLACEHOLDER:
            part.feeds[node.outputs[0]] = new.outputs[0]
    for i, v in enumerate(outputs):
        part = parts[where[v.node.id]]
        part.outputs.append(part._rw.value(v))
        part.out_index.append(i)
    return parts


def _wait_for(c: GNode, node: GNode, dev: Device, parts: dict, where: dict, waits: dict) -> GNode:
    """A control edge c -> node between devices: a signal after c in c's part, a wait in node's part."""
    wait = waits.get((c.id, dev))
    if wait is not None:
        return wait
    key = f"control %{c.id}->{dev}"
    src_part, part = parts[where[c.id]], parts[dev]
    src_part._rw.add_op(SIGNAL_PART, [], {"key": key, "dst": dev}, where[c.id])
    signal = src_part.graph.nodes[-1]
    signal.control_inputs = [src_part._rw.nmap[c]]
    src_part.origin[signal.id] = c
    part._rw.add_op(WAIT_PART, [], {"key": key, "src": where[c.id]}, dev)
    wait = waits[(c.id, dev)] = part.graph.nodes[-1]
    part.origin[wait.id] = node
    return wait


def _cut_recv(node: GNode, dev: Device, where: dict, part: Part) -> GNode:
    """The recv end of a pair in the destination's part: no input, it takes the value by key."""
    (x,) = node.value_inputs()
    send = x.node
    key, src = node.attrs["key"], node.attrs["src"]
    if send.kind != "op" or send.op is not send_op:
        _fail(f"recv (node %{node.id}) reads %{send.id} ({send.op_name}), not a send")
    if send.attrs["key"] != key or where[send.id] is not src or send.attrs["dst"] is not dev:
        _fail(
            f"recv (node %{node.id}, key {key!r}, {src}->{dev}) does not match send (node %{send.id}, key "
            f"{send.attrs['key']!r}, {where[send.id]}->{send.attrs['dst']})"
        )
    out = node.outputs[0]
    attrs = {"key": key, "src": src, "dst": dev, "shape": tuple(out.shape), "dtype": out.dtype}
    value = part._rw.add_op(RECV_PART, [], attrs, dev)
    new = part.graph.nodes[-1]
    part._rw.alias(out, value)
    part._rw.nmap[node] = new
    return new
