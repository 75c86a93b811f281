"""Algebraic simplification: identities that remove or merge ops without changing any result.

Every rewrite is kept only when the replacement has exactly the original output's shape, dtype
and device, so promotion and broadcasting stay as they were. Rules: x*1, 1*x, x+0, 0+x, x-0, x/1,
x**1, neg(neg x), permute chains (to identity or one permute), reshape/view chains (to one
reshape), reshape/view to the same shape, cast to the same dtype, cast chains whose middle
cast loses nothing, and `linear` over more than two dims as one 2-D product between reshapes. `exp(log x)` and `log(exp x)` change results (x <= 0, overflow, rounding), so
they are applied only by the separate `algebraic_unsafe` pass.
"""

from __future__ import annotations

import numpy as np

from ember.graph.ir import CONSTANT, Graph, Value
from ember.graph.passes.rewrite import Rewriter, host_value, same_spec, static_shape, users_of
from ember.op import OPS


def _constant_all(x, target) -> bool:
    """Whether an operand is a Python number or a constant array with every element == target."""
    if isinstance(x, Value):
        if x.node.kind != CONSTANT:
            return False
        arr = host_value(x.node.attrs["value"])
        return arr.dtype.kind in "biuf" and arr.size > 0 and bool(np.all(arr == target))
    return isinstance(x, (bool, int, float)) and x == target


def _lossless(src, dst) -> bool:
    """Every value of dtype src is exactly representable in dst."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst or src.kind == "b":
        return src.kind in "biuf" and dst.kind in "biuf"
    if src.kind == "f":
        return dst.kind == "f" and dst.itemsize >= src.itemsize
    if src.kind in "iu" and dst.kind == "f":
        mantissa = {2: 11, 4: 24, 8: 53}.get(dst.itemsize, 0)
        return src.itemsize * 8 - (src.kind == "i") <= mantissa
    if src.kind == "i":
        return dst.kind == "i" and dst.itemsize >= src.itemsize
    if src.kind == "u":
        return (dst.kind == "u" and dst.itemsize >= src.itemsize) or (dst.kind == "i" and dst.itemsize > src.itemsize)
    return False


def _perm(dims, ndim) -> tuple:
    return tuple(int(d) % max(ndim, 1) for d in dims)


def _producer(x, name):
    """The op node that made value x, when it is an op called `name`."""
    if isinstance(x, Value) and x.node.kind == "op" and x.node.op.name == name:
        return x.node
    return None


def _identity_operand(name, ins):
    """The operand that an identity element leaves unchanged (x*1, x+0, ...), else None."""
    if len(ins) != 2:
        return None
    a, b = ins
    if name == "mul":
        return a if _constant_all(b, 1) else b if _constant_all(a, 1) else None
    if name == "add":
        return a if _constant_all(b, 0) else b if _constant_all(a, 0) else None
    if name == "sub":
        return a if _constant_all(b, 0) else None
    if name in ("div", "pow"):
        return a if _constant_all(b, 1) else None
    return None


def _rule(node, ins, users, unsafe):
    """A replacement for node's output: a Value, or (op, inputs, attrs) to build; None if no rule applies."""
    name = node.op.name
    out = node.outputs[0]
    x = ins[0] if ins else None
    hit = _identity_operand(name, ins)
    if isinstance(hit, Value):
        return hit
    if name == "neg" and out.dtype != np.bool_ and (inner := _producer(x, "neg")) is not None:
        return inner.inputs[0]
    if unsafe and name in ("exp", "log"):
        inner = _producer(x, "log" if name == "exp" else "exp")
        if inner is not None:
            return inner.inputs[0]
    if name == "permute":
        dims = _perm(node.attrs["dims"], len(x.shape))
        inner = _producer(x, "permute")
        if inner is not None:
            src = inner.inputs[0]
            first = _perm(inner.attrs["dims"], len(src.shape))
            dims = tuple(first[d] for d in dims)
            x = src
        if dims == tuple(range(len(dims))):
            return x
        if inner is not None:
            return OPS["permute"], [x], {"dims": dims}
    if name in ("reshape", "view"):
        if static_shape(out) and same_spec(x, out):
            return x
        inner = _producer(x, "reshape") or _producer(x, "view")
        views_follow = any(u.kind == "op" and u.op.name == "view" for u, _ in users.get(out, ()))
        if name == "reshape" and inner is not None and not views_follow:
            src = inner.inputs[0]
            if static_shape(out) and same_spec(src, out):
                return src
            return OPS["reshape"], [src], dict(node.attrs)
    if name == "cast":
        if x.dtype == out.dtype:
            return x
        inner = _producer(x, "cast")
        if inner is not None and _lossless(inner.inputs[0].dtype, x.dtype):
            src = inner.inputs[0]
            return src if src.dtype == out.dtype else (OPS["cast"], [src], dict(node.attrs))
    return None


def _flat_linear(rw: Rewriter, node, ins):
    """linear over (..., C) as one 2-D product: reshape to (-1, C), linear, reshape back (or None).

    The eager kernel does the same for contiguous inputs; the out= kernel a planned buffer gets would
    otherwise run NumPy's batched matmul, one small GEMM per leading index.
    """
    x = ins[0]
    out = node.outputs[0]
    if not isinstance(x, Value) or len(x.shape) <= 2 or not static_shape(x) or not static_shape(out):
        return None
    reshape = OPS["reshape"]
    flat = rw.add_op(reshape, [x], {"shape": (-1, x.shape[-1])}, x.device)
    y = rw.add_op(node.op, [flat, *ins[1:]], dict(node.attrs), out.device)
    return rw.add_op(reshape, [y], {"shape": tuple(out.shape)}, out.device)


def _simplify(graph: Graph, outputs: list, unsafe: bool) -> tuple:
    rw = Rewriter(graph)
    users = users_of(graph)
    for node in graph.nodes:
        if node.kind != "op" or len(node.outputs) != 1 or node.control_inputs or getattr(node.op, "stateful", False):
            rw.copy(node)
            continue
        ins = rw.inputs(node)
        if node.op.name == "linear":
            flat = _flat_linear(rw, node, ins)
            if flat is not None and same_spec(flat, node.outputs[0]):
                rw.alias(node.outputs[0], flat)
                continue
        try:
            rule = _rule(node, ins, users, unsafe)
        except (KeyError, IndexError, TypeError, ValueError):
            rule = None
        out = node.outputs[0]
        if isinstance(rule, Value) and same_spec(rule, out):
            rw.alias(out, rule)
            continue
        if isinstance(rule, tuple):
            op, args, attrs = rule
            spec = op.infer(*args, **attrs)
            if tuple(spec.shape) == out.shape and spec.dtype == out.dtype:
                rw.alias(out, rw.add_op(op, args, attrs, out.device))
                continue
        rw.copy(node, ins)
    return rw.graph, rw.outputs(outputs), rw.vmap


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` with exact algebraic identities applied."""
    return _simplify(graph, outputs, unsafe=False)


def run_unsafe(graph: Graph, outputs: list) -> tuple:
    """`run` plus exp(log x) -> x and log(exp x) -> x, which differ for x <= 0 and on overflow."""
    return _simplify(graph, outputs, unsafe=True)
