"""Turning op calls on symbolic tensors into graph nodes (installed into ops.dispatch)."""

from __future__ import annotations

from ember.graph.ir import Value
from ember.ops import dispatch
from ember.tensor import Tensor


def build_node(op, inputs, arrays, attrs, device):
    """Append `op` to the graph of its symbolic inputs (or of the active trace).

    Concrete tensors met here are captured: the graph reads them afresh at every run, so
    parameters and closure tensors are inputs, never constants frozen at build time.
    """
    graph = None
    for a in arrays:
        if isinstance(a, Value):
            graph = a.node.graph
            break
    tracer = dispatch.trace_state.hook
    if graph is None:
        if tracer is None:
            raise RuntimeError(f"{op.name}: no graph to add to")
        graph = tracer.graph
    ins = []
    for x, a in zip(inputs, arrays):
        if isinstance(a, Value):
            ins.append(a)
        elif isinstance(x, Tensor):
            ins.append(tracer.lift(x) if tracer is not None else graph.capture(x))
        else:
            ins.append(a)
    return graph.add_op(op, ins, attrs, device)


dispatch.graph_builder[0] = build_node
