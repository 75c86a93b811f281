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
from ember.autograd.grad_mode import enable_grad
from ember.graph.ir import PLACEHOLDER, GNode, Graph, Value
from ember.graph.replay import Replay, leaf
from ember.ops._rules import FLOAT_NP


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
    replay = Replay(new, fed)
    tensors, node_map = replay.tensors, replay.nodes
    for v, shape in fed_shapes.items():
        name = v.node.name if v.node.kind == PLACEHOLDER else f"{v.node.name or v.node.op_name}/fed"
        tensors[v] = leaf(new.placeholder(tuple(shape), v.dtype, v.device, name=name), v.dtype in FLOAT_NP)
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
            replay.node(n)
    return Specialized(new, tensors, node_map)


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
