"""Constant folding: ops whose inputs are all constants run once at compile time and become constants.

Captured tensors are inputs, not constants (they change between runs), and stateful ops (random
draws, assignments) always run. Ops that read only their input's shape (`full_like`,
`host_constant`) fold whenever that shape is static. Results larger than `MAX_FOLD_BYTES` stay
computed at run time so a graph never carries big arrays.
"""

from __future__ import annotations

import numpy as np

from ember.backends.meta import MetaArray
from ember.graph.ir import CONSTANT, Graph, Value
from ember.graph.passes.rewrite import Rewriter, is_stateful, static_shape
from ember.kernels.background import compiles_here
from ember.symbolic import has_symbols

MAX_FOLD_BYTES = 1 << 20
_SHAPE_ONLY = frozenset({"full_like", "host_constant"})  # the input's data is never read


def _constant_of(v):
    if isinstance(v, Value) and v.node.kind == CONSTANT:
        return v.node.attrs["value"]
    return None


def _fold_inputs(node, rw: Rewriter):
    """The kernel arguments if `node` can be evaluated now, else None."""
    shape_only = node.op.name in _SHAPE_ONLY
    args = []
    n_values = 0
    for x in node.inputs:
        x = rw.value(x)
        if not isinstance(x, Value):
            args.append(x)
            continue
        n_values += 1
        c = _constant_of(x)
        if c is not None:
            args.append(c)
        elif shape_only and static_shape(x):
            args.append(MetaArray(x.shape, x.dtype))
        else:
            return None
    return args if n_values else None


@compiles_here
def _evaluate(node, args):
    backend = node.outputs[0].device.backend
    if backend.abstract:
        return None
    try:
        with np.errstate(all="ignore"):
            out = node.op.kernel(np, *args, **node.attrs) if backend.direct else backend.run(
                node.op.kernel, args, node.attrs)
    except Exception:  # noqa: BLE001 - an op that fails now fails the same way at run time
        return None
    outs = out if len(node.outputs) > 1 else (out,)
    if len(outs) != len(node.outputs):
        return None
    results = []
    for o, v in zip(outs, node.outputs):
        if isinstance(o, np.generic):
            o = np.asarray(o)
        if tuple(o.shape) != v.shape or o.dtype != v.dtype or o.nbytes > MAX_FOLD_BYTES:
            return None
        results.append(o)
    return results


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` with every foldable op replaced by constants."""
    rw = Rewriter(graph)
    for node in graph.nodes:
        if node.kind != "op" or is_stateful(node) or node.control_inputs or has_symbols(node.inputs) or \
                has_symbols(node.attrs):  # a symbolic size is not a constant
            rw.copy(node)
            continue
        args = _fold_inputs(node, rw)
        if args is None or any(not static_shape(v) or v.nbytes > MAX_FOLD_BYTES for v in node.outputs):
            rw.copy(node)
            continue
        results = _evaluate(node, args)
        if results is None:
            rw.copy(node)
            continue
        for old, arr in zip(node.outputs, results):
            rw.alias(old, rw.graph.constant(arr, old.device))
    return rw.graph, rw.outputs(outputs), rw.vmap
