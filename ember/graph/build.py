"""Turning op calls on symbolic tensors into graph nodes, placed on devices (installed into ops.dispatch).

Placement: an op built inside `with ember.device(d):` (or ember.v1's `tf.device`) runs on d; an op
built outside any scope runs where its inputs are. Each input on another device than the op's
reaches it through a send/recv pair (ember.ops.transfer_ops), which autograd records like any op,
so gradients go back across the same boundary.
"""

from __future__ import annotations

import weakref

from ember.autograd.grad_mode import state as grad_state
from ember.device import scope_device
from ember.graph.ir import Value
from ember.ops import dispatch
from ember.ops.transfer_ops import transfer
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


def place_inputs(op, inputs):
    """Under a device scope, `inputs` with every tensor moved to the scope's device; None when none moves."""
    if getattr(op, "placed", False):  # send and recv say themselves where they run
        return None
    tracer = dispatch.trace_state.hook
    # A trace is placed only by scopes opened inside the traced function (jit keys plans without them).
    dev = scope_device(getattr(tracer, "scope_base", 0) if tracer is not None else 0)
    if dev is None or dev.type == "meta":
        return None
    if all(not isinstance(x, Tensor) or x._device is dev for x in inputs):
        return None
    graph = next((x._data.node.graph for x in inputs if isinstance(x, Tensor) and isinstance(x._data, Value)),
                 tracer.graph if tracer is not None else None)
    return [_moved(x, dev, graph) if isinstance(x, Tensor) and x._device is not dev else x for x in inputs]


def _moved(x: Tensor, dev, graph) -> Tensor:
    """x on `dev`; a tensor already moved there in this graph (same value, same autograd) reuses its pair."""
    if graph is None:
        return transfer(x, dev)
    cache = graph.__dict__.setdefault("_moved", {})
    key = (id(x), dev)
    wants_grad = x._requires_grad and grad_state.enabled
    hit = cache.get(key)
    if hit is not None:
        src, data_id, version, grad, out = hit[0](), hit[1], hit[2], hit[3], hit[4]()
        if src is x and out is not None and data_id == id(x._data) and version == x._version[0] and grad == wants_grad:
            return out
    out = transfer(x, dev)
    # Weak references only: jit treats symbolic tensors still alive after a trace as stored outside it.
    cache[key] = (weakref.ref(x), id(x._data), x._version[0], wants_grad, weakref.ref(out))
    return out


dispatch.graph_builder[0] = build_node
dispatch.graph_placer[0] = place_inputs
