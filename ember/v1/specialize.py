"""Shape specialisation: rebuild the part of a graph one run needs, with the fed shapes filled in.

A placeholder of shape [None, 784] makes nodes whose shape attributes hold None: gradient rules
take shapes from their inputs (expand a reduced gradient back to shape (None, 784), divide by the
element count), and such nodes cannot run. So before running with concrete feeds, a session
replays the nodes it needs into a fresh graph where every fed value is a placeholder of its real
shape, and redoes each gradients() call among them with autograd on the replayed tensors. Every
shape is then known, every rule builds concrete nodes, and shape errors name the op and shapes.
Feeding a tensor that is not a placeholder works the same way: it becomes a placeholder.
"""

from __future__ import annotations

import bisect

from ember import autograd
from ember import ops as _ops
from ember.autograd import record
from ember.autograd.grad_mode import enable_grad
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, GNode, Graph, Value
from ember.ops._rules import FLOAT_NP
from ember.tensor import Tensor


class Specialized:
    """A replayed graph and the map from the original values and nodes to the replayed ones."""

    def __init__(self, graph: Graph, tensors: dict, nodes: dict) -> None:
        self.graph = graph
        self.tensors = tensors  # original Value -> replayed Tensor
        self.nodes = nodes  # original GNode -> replayed GNode

    def value(self, v: Value) -> Value:
        """The replayed value of an original one."""
        return self.tensors[v]._data

    def node(self, n: GNode) -> GNode:
        """The replayed node of an original one."""
        return self.nodes[n]


class _Records:
    """The graph's gradients() records, found by node id."""

    def __init__(self, graph) -> None:
        self.records = sorted(getattr(graph, "gradient_records", ()), key=lambda r: r.start)
        self.starts = [r.start for r in self.records]

    def of(self, node_id: int):
        i = bisect.bisect_right(self.starts, node_id) - 1
        if i >= 0 and node_id < self.records[i].end:
            return self.records[i]
        return None


def needed_nodes(graph, values, nodes, fed: set, records: _Records) -> list:
    """The nodes a run of `values` and `nodes` needs, with the inputs of any gradients() call involved.

    A fed value cuts the graph: what only it depends on is not needed.
    """
    need: set = set()
    stack = [v.node for v in values if v not in fed] + list(nodes)
    seen_records: set = set()
    while stack:
        n = stack.pop()
        if n.id in need:
            continue
        need.add(n.id)
        stack.extend(x.node for x in n.inputs if isinstance(x, Value) and x not in fed)
        stack.extend(n.control_inputs)
        rec = records.of(n.id)
        if rec is not None and id(rec) not in seen_records:
            seen_records.add(id(rec))
            roots = rec.ys + rec.xs + [g for g in rec.grad_ys if g is not None]
            stack.extend(v.node for v in roots if v not in fed)
    return [graph.nodes[i] for i in sorted(need)]


def specialize(graph, values, nodes, fed_shapes: dict) -> Specialized:
    """Replay what `values` and `nodes` need into a new graph; fed values get the shapes in `fed_shapes`."""
    records = _Records(graph)
    fed = set(fed_shapes)
    new = Graph(f"{graph.name}/specialized")
    tensors: dict = {}
    node_map: dict = {}
    for v, shape in fed_shapes.items():
        name = v.node.name if v.node.kind == PLACEHOLDER else f"{v.node.name or v.node.op_name}/fed"
        tensors[v] = _leaf(new.placeholder(tuple(shape), v.dtype, v.device, name=name), v.dtype in FLOAT_NP)
        if v.node.kind == PLACEHOLDER:
            node_map[v.node] = tensors[v]._data.node
    replayed: set = set()
    with enable_grad():
        for n in needed_nodes(graph, values, nodes, fed, records):
            if n in node_map:
                continue
            rec = records.of(n.id)
            if rec is not None:
                if id(rec) not in replayed:
                    replayed.add(id(rec))
                    _replay_gradients(rec, tensors, node_map, fed)
                continue
            new_node = _replay_node(new, n, tensors, fed)
            node_map[n] = new_node
            try:
                new_node.control_inputs = [node_map[c] for c in n.control_inputs]
            except KeyError as e:
                raise RuntimeError(f"cannot specialize {n!r}: its control input {e.args[0]!r} was not rebuilt") from None
    return Specialized(new, tensors, node_map)


def _leaf(value: Value, requires_grad: bool) -> Tensor:
    t = Tensor._make(value, value.device)
    if requires_grad:
        t._requires_grad = True
    return t


def _input(tensors: dict, x, n: GNode):
    if not isinstance(x, Value):
        return x
    try:
        return tensors[x]
    except KeyError:
        raise RuntimeError(
            f"cannot specialize {n!r}: it uses {x!r}, an intermediate of a gradients() computation that is "
            "rebuilt as a whole"
        ) from None


def _replay_node(new: Graph, n: GNode, tensors: dict, fed: set) -> GNode:
    """Add a copy of node n to `new`, recording autograd as dispatch.apply would."""
    if n.kind == PLACEHOLDER:
        v = n.outputs[0]
        value = new.placeholder(n.attrs["shape"], v.dtype, v.device, name=n.name)
        tensors[v] = _leaf(value, v.dtype in FLOAT_NP)
        return value.node
    if n.kind in (VARIABLE, CAPTURE, CONSTANT):
        v = n.outputs[0]
        if n.kind == VARIABLE:
            value, grad = new.variable(n.attrs["variable"], name=n.name), v.dtype in FLOAT_NP
        elif n.kind == CAPTURE:
            value, grad = new.capture(n.attrs["tensor"]), n.attrs["tensor"].requires_grad
        else:
            value, grad = new.constant(n.attrs["value"], v.device, name=n.name), False
        tensors[v] = _leaf(value, grad)
        return value.node
    ins = [_input(tensors, x, n) for x in n.inputs]
    arrays = [x._data if isinstance(x, Tensor) else x for x in ins]
    device = n.outputs[0].device if n.outputs else next((x._device for x in ins if isinstance(x, Tensor)), None)
    if device is None:
        from ember.device import as_device

        device = as_device("cpu")
    res = new.add_op(n.op, arrays, n.attrs, device, name=n.name)
    new_node = new.nodes[-1]
    outs = [Tensor._make(v, v.device) for v in (res if isinstance(res, tuple) else (res,))]
    linked = getattr(n.op, "autograd_inputs", None)
    if linked is not None:  # a node autograd links to values it does not read as data (variable reads)
        ins = [tensors[v] for v in linked(n.attrs) if v in tensors]
    if n.op.differentiable and any(isinstance(x, Tensor) and x._requires_grad for x in ins):
        if any(t._data.dtype in FLOAT_NP for t in outs):
            record(n.op, n.attrs, tuple(ins), tuple(outs))
    for old, t in zip(n.outputs, outs):
        if old not in fed:
            tensors[old] = t
    return new_node


def _replay_gradients(rec, tensors: dict, node_map: dict, fed: set) -> None:
    """Redo one gradients() call on the replayed tensors and map its results."""
    ys = [tensors[v] for v in rec.ys]
    xs = [tensors[v] for v in rec.xs]
    gys = [_ops.ones_like(y) if g is None else tensors[g] for y, g in zip(ys, rec.grad_ys)]
    grads = autograd.grad(ys, xs, grad_outputs=gys, create_graph=True, retain_graph=True, allow_unused=True)
    for x, old, g in zip(xs, rec.results, grads):
        if old is None or old in fed:
            continue
        if g is None:  # reached, but every path's rule gave no gradient: a zero one, as deferred builds promised
            g = _ops.zeros_like(x)
        tensors[old] = g
        node_map.setdefault(old.node, g._data.node)
