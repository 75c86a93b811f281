"""`GraphBuilder`: the interpreter that turns op calls into graph nodes, placed on devices.

Ops on symbolic tensors (ember.v1 graphs) go to the builder of their graph (`Graph.builder`);
while ember.jit traces, every op goes to the trace's builder (`ember.graph.trace.Tracer`).
Concrete tensors met while building are captured: the graph reads them afresh at every run, so
parameters and closure tensors are inputs, never constants frozen at build time. In-place writes
are functional: a symbolic tensor is rebound to its new value.

Placement: an op built inside `with ember.device(d):` (or ember.v1's `tf.device`) runs on d; an op
built outside any scope runs where its inputs are. Each input on another device than the op's
reaches it through a send/recv pair (ember.ops.transfer_ops), which autograd records like any op,
so gradients go back across the same boundary.
"""

from __future__ import annotations

import weakref

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.device import scope_device
from ember.dispatch import is_symbolic
from ember.errors import ConcretizationError, fmt_shape
from ember.graph.ir import Value
from ember.interpreter import Interpreter
from ember.ops.host_random import _host_random_op as HostRandom
from ember.ops.transfer_ops import transfer
from ember.tensor import Tensor


class GraphBuilder(Interpreter):
    """Appends a node per op to `graph` instead of computing."""

    symbolic = True
    scope_base = 0  # device scopes opened at a lower depth do not place the ops built here

    def __init__(self, graph) -> None:
        self.graph = graph

    def capture(self, t: Tensor) -> Value:
        """The graph value of a concrete tensor read by the graph."""
        return self.graph.capture(t)

    def run(self, op, inputs, arrays, attrs, device):
        graph = self.graph
        for a in arrays:
            if isinstance(a, Value):
                graph = a.node.graph  # add_op names both graphs if inputs come from two
                break
        ins = []
        for x, a in zip(inputs, arrays):
            if isinstance(a, Value):
                ins.append(a)
            elif isinstance(x, Tensor):
                ins.append(self.capture(x))
            else:
                ins.append(a)
        return graph.add_op(op, ins, attrs, device)

    def write(self, target, result, name: str) -> None:
        if target._view_fn is not None and target._base is not None and is_symbolic(target._base):
            raise NotImplementedError(
                f"{name}: in-place writes through a view are not supported while building a graph; "
                "write into the base tensor (x[idx] = v) or use out-of-place ops"
            )
        value = result._data if isinstance(result, Tensor) else result
        if isinstance(result, Tensor) and not is_symbolic(result):
            value = self.capture(result)
        self.rebind(target, value)

    def rebind(self, target: Tensor, value) -> None:
        """An in-place write while building: the tensor now stands for the new value."""
        target._data = value

    def random(self, draw, shape, np_dtype, device, generator=None, like=None) -> Tensor:
        """A node that calls `draw` on the device's generator at every run (randn, rand, dropout masks), laying
        the values out in the memory order of `like` (a tensor of that shape) as it is at run time."""
        inputs = [] if like is None else [like._data if is_symbolic(like) else self.capture(like)]
        value = self.graph.add_op(HostRandom, inputs, {"draw": draw, "shape": tuple(shape),
                                                       "dtype": np.dtype(np_dtype), "generator": generator}, device)
        t = Tensor._make(value, device)
        self.outputs((t,))
        return t

    def prepare(self, op, inputs):
        """Under a device scope: the inputs moved to the scope's device through send/recv pairs."""
        if getattr(op, "placed", False):  # send and recv say themselves where they run
            return None
        dev = scope_device(self.scope_base)
        if dev is None or dev.type == "meta" or all(not isinstance(x, Tensor) or x._device is dev for x in inputs):
            return _cast_below(self, op, inputs)
        return [_moved(x, dev, self.graph) if isinstance(x, Tensor) and x._device is not dev else x for x in inputs]


def _cast_below(interp, op, inputs):
    """What an input-casting interpreter below `interp` (autocast entered before the trace) makes of the op's
    inputs; graph builders in between are skipped, since their graphs are not the one being built."""
    node = interp.below
    while node is not None:
        if node.casts_inputs:
            return node.prepare(op, inputs)
        node = node.below
    return None


def _moved(x: Tensor, dev, graph) -> Tensor:
    """x on `dev`; a tensor already moved there in this graph (same value, same autograd) reuses its pair."""
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


def concretization_error(what: str, t: Tensor) -> ConcretizationError:
    """The error for reading, in Python, an outside tensor a trace has written in place."""
    return ConcretizationError(
        f"{what}: this tensor of shape {fmt_shape(t.shape)} was updated in place inside the function "
        "ember.jit is tracing, so its value is only known when the graph runs. Keep the computation in "
        "tensor ops instead of reading the value in Python."
    )
