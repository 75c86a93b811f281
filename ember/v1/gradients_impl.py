"""`gradients`: the backward graph, built by Ember's autograd running on symbolic tensors.

Each call is recorded on the graph (which nodes it built, from which ys, xs and grad_ys), so a
session can rebuild the same gradients once the fed shapes are known (see specialize.py). Some
gradient rules cannot be built while a dimension is unknown (Ember's mean divides by the element
count, concat's splits by input sizes); their gradients are then deferred: a placeholder node of
the right shape stands for each one, and sessions build the real backward graph per fed shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember import autograd
from ember import ops as _ops
from ember.autograd import Node, walk
from ember.autograd.grad_mode import enable_grad
from ember.op import Op, register
from ember.ops._rules import spec
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.graph_tensor import GraphTensor


@dataclass
class GradientRecord:
    """One gradients() call: its inputs, its results and the range of node ids it appended."""

    ys: list  # Values of the outputs differentiated
    xs: list  # Values of the inputs, only those that require grad
    grad_ys: list  # Values of the output gradients, or None for ones
    results: list  # Value (or None) per entry of xs
    start: int
    end: int


class DeferredGradientOp(Op):
    """Stands for a gradient whose rule needs dimensions unknown when the graph was built."""

    name = "deferred_gradient"
    differentiable = False

    def infer(self, *ys, shape, dtype, reason):
        return spec(shape, dtype)

    def kernel(self, xp, *ys, shape, dtype, reason):
        raise RuntimeError(
            f"this gradient could not be built while dimensions were unknown ({reason}); it is built when a "
            "session runs it with every placeholder of unknown shape fed"
        )


deferred_gradient_op = register(DeferredGradientOp())


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def gradients(ys, xs, grad_ys=None, name: str = "gradients", colocate_gradients_with_ops: bool = False,
              gate_gradients: bool = False, aggregation_method=None, stop_gradients=None) -> list:
    """Symbolic d(sum of ys)/d(x) for each x in xs; None where x does not affect ys (as TF)."""
    ys = [convert_to_tensor(y) for y in _as_list(ys)]
    xs_list = _as_list(xs)
    for x in xs_list:
        if not is_symbolic(x):
            raise TypeError(f"gradients: xs must be graph tensors, got {type(x).__name__}")
    gys = [None] * len(ys) if grad_ys is None else _as_list(grad_ys)
    if len(gys) != len(ys):
        raise ValueError(f"gradients: {len(ys)} ys but {len(gys)} grad_ys")
    if stop_gradients:
        raise NotImplementedError("gradients: stop_gradients is not supported; use tf.stop_gradient in the graph")
    graph = ys[0]._data.graph
    start = len(graph.nodes)
    pairs = [(y, g) for y, g in zip(ys, gys) if y._requires_grad]
    wanted = [x for x in xs_list if x._requires_grad]
    results: dict = {}
    if pairs and wanted:
        ys_in = [y for y, _ in pairs]
        gys_in = [_ops.ones_like(y) if g is None else convert_to_tensor(g, dtype_hint=y.dtype) for y, g in pairs]
        try:
            with enable_grad():
                grads = autograd.grad(ys_in, wanted, grad_outputs=gys_in, create_graph=True, retain_graph=True,
                                      allow_unused=True)
        except (TypeError, ValueError) as e:
            if not _has_unknown_dims(graph, ys_in):
                raise
            grads = _deferred(ys_in, wanted, f"{type(e).__name__}: {e}")
        for x, g in zip(wanted, grads):
            results[id(x)] = g
        if hasattr(graph, "gradient_records"):
            graph.gradient_records.append(GradientRecord(
                ys=[y._data for y in ys_in], xs=[x._data for x in wanted],
                grad_ys=[None if g is None else gy._data for (_, g), gy in zip(pairs, gys_in)],
                results=[None if g is None else g._data for g in grads], start=start, end=len(graph.nodes),
            ))
    return [results.get(id(x)) for x in xs_list]


def _has_unknown_dims(graph, ys: list) -> bool:
    return any(d is None for n in graph.needed_for([y._data for y in ys]) for v in n.outputs for d in v.shape)


def _deferred(ys: list, xs: list, reason: str) -> list:
    """A stand-in node per x that ys depend on (through recorded ops), None for the others."""
    graph = ys[0]._data.graph
    out = []
    for x, connected in zip(xs, _connected(ys, xs)):
        if not connected:
            out.append(None)
            continue
        value = graph.add_op(deferred_gradient_op, [y._data for y in ys],
                             {"shape": tuple(x.shape), "dtype": x._data.dtype, "reason": reason}, x._device)
        out.append(GraphTensor._make(value, x._device))
    return out


def _connected(ys: list, xs: list) -> list:
    """Whether autograd reaches each x from ys (what it would give a gradient, maybe zero)."""
    leaves = {id(y) for y in ys if y._grad_fn is None}
    outs = {(id(y._grad_fn), y._output_nr) for y in ys if y._grad_fn is not None}
    for node in walk([y._grad_fn for y in ys]):
        for edge in node.edges:
            if edge is None:
                continue
            parent, nr = edge
            if type(parent) is Node:
                outs.add((id(parent), nr))
            else:
                leaves.add(id(parent))
    return [id(x) in leaves if x._grad_fn is None else (id(x._grad_fn), x._output_nr) in outs for x in xs]
