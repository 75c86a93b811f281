"""Common-subexpression elimination: one node for each (op, inputs, attributes) computed twice.

Attributes are compared structurally (slices, arrays, nested tuples); Python scalars keep their
type (1, 1.0 and True promote differently). Stateful ops are never merged, and small constants
with equal contents are shared.
"""

from __future__ import annotations

from ember.graph.ir import CONSTANT, Graph, Value
from ember.graph.passes.rewrite import Rewriter, freeze, host_value, is_stateful

_MAX_CONSTANT_KEY_BYTES = 1 << 16  # larger constants are compared by identity only


def _input_key(x):
    if isinstance(x, Value):
        return ("v", id(x))
    return ("s", freeze(x))


def _node_key(node, rw: Rewriter):
    if node.kind == "op":
        ins = tuple(_input_key(rw.value(x)) for x in node.inputs)
        ctrl = tuple(sorted(rw.nmap[c].id for c in node.control_inputs if c in rw.nmap))
        return ("op", id(node.op), ins, freeze(node.attrs), ctrl)
    if node.kind == CONSTANT:
        value = host_value(node.attrs["value"])
        if value.nbytes <= _MAX_CONSTANT_KEY_BYTES and not node.control_inputs:
            return ("const", value.dtype.str, value.shape, value.tobytes(), node.outputs[0].device)
    return None  # placeholders, captures, variables: distinct by nature


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` where each repeated computation reuses the first one's outputs."""
    rw = Rewriter(graph)
    seen: dict = {}
    for node in graph.nodes:
        key = None if is_stateful(node) or node.name is not None and node.kind != "op" else _node_key(node, rw)
        hit = seen.get(key) if key is not None else None
        if hit is not None and len(hit.outputs) == len(node.outputs):
            for old, new in zip(node.outputs, hit.outputs):
                rw.alias(old, new)
            rw.nmap[node] = hit
            continue
        new = rw.copy(node)
        if key is not None:
            seen[key] = new
    return rw.graph, rw.outputs(outputs), rw.vmap
