"""Lowering lerp, addcmul and addcdiv to elementary ops, so that fusion can merge an optimizer's update.

Eager, these are one kernel each (ops/pointwise.py), and Adam and SGD's eager updates are one compiled
pass per parameter (optim/fused.py). A traced update is a chain of them with the bias-correction
scalars, which fusion could not join: about six kernels per parameter. Here each becomes the same
float32/float64 operations in the kernel's order: (value * t1) * t2 + x for addcmul, (value * t1) / t2 + x
for addcdiv, and for lerp start + weight * (end - start) where |weight| < 0.5, else end - (end - start)
* (1 - weight). The coefficient is first cast to the compute dtype, as the kernel does, so the values
are the kernel's bit for bit. float16/bfloat16 (computed in float32 and rounded once) and mixed dtypes
keep the single op.
"""

from __future__ import annotations

from ember.graph.ir import Graph, Value
from ember.graph.passes.rewrite import Rewriter, control_targets, same_spec
from ember.op import OPS
from ember.ops._rules import SINGLE_DOUBLE_NP

_LOWERED = ("lerp", "addcmul", "addcdiv")


def _coefficient(rw, c, dtype, device):
    """The coefficient in the compute dtype: a Python number as it is (NumPy rounds it to the array's
    dtype, as the kernel does), a 0-d value through a cast."""
    if isinstance(c, Value):
        if c.shape != () or c.dtype.kind not in "biuf":
            return None
        return c if c.dtype == dtype else rw.add_op(OPS["cast"], [c], {"dtype": dtype}, device)
    return c if isinstance(c, (int, float)) and not isinstance(c, bool) else None


def _lowered(rw, node, ins):
    """The node's elementary form in the new graph, or None to keep it."""
    out = node.outputs[0]
    tensors = ins[:2] if node.op.name == "lerp" else ins[:3]
    if out.dtype not in SINGLE_DOUBLE_NP or any(not isinstance(t, Value) or t.dtype != out.dtype for t in tensors):
        return None
    dev = out.device
    c = _coefficient(rw, ins[2] if node.op.name == "lerp" else ins[3], out.dtype, dev)
    if c is None:
        return None

    def op(name, *args):
        return rw.add_op(OPS[name], list(args), {}, dev)

    if node.op.name == "lerp":
        start, end = tensors
        diff = op("sub", end, start)
        if not isinstance(c, Value):  # the kernel's branch, taken on the coefficient rounded to the dtype
            w = out.dtype.type(c)
            if abs(w) < 0.5:
                return op("add", start, op("mul", c, diff))
            return op("sub", end, op("mul", diff, float(out.dtype.type(1) - w)))
        near = op("add", start, op("mul", c, diff))
        far = op("sub", end, op("mul", diff, op("sub", 1, c)))
        return op("where", op("lt", op("abs", c), 0.5), near, far)
    x, t1, t2 = tensors
    scaled = op("mul", c, t1)
    return op("add", op("mul" if node.op.name == "addcmul" else "div", scaled, t2), x)


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` with lerp, addcmul and addcdiv of float32/float64 tensors as elementary ops."""
    rw = Rewriter(graph)
    # An op that a write waits for (its old value is read first) keeps its one node: fusion's convexity
    # check follows data edges only, and a region holding part of it could then close a loop through the write.
    waited_for = control_targets(graph)
    for node in graph.nodes:
        if node.kind == "op" and node.op.name in _LOWERED and len(node.outputs) == 1 and not node.control_inputs \
                and node.id not in waited_for:
            new = _lowered(rw, node, rw.inputs(node))
            if new is not None and same_spec(new, node.outputs[0]):
                rw.alias(node.outputs[0], new)
                continue
        rw.copy(node)
    return rw.graph, rw.outputs(outputs), rw.vmap
