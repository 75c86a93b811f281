"""`V1Builder`: the interpreter that builds ops on ember.v1 graph tensors, with TF1's dtype rules.

It is the graph builder of every ember.v1 graph (and of the subgraphs of its control-flow ops), so
the rules hold for TF's functions and for Python operators on graph tensors alike, where TF1 and
PyTorch differ:
- arithmetic and comparisons never mix integer and floating-point operands: an int32 tensor with a
  float tensor, or with a Python float, is a TypeError naming the op (PyTorch would promote);
- true division of integers is floating-point division in float64 (float32 for 8- and 16-bit
  integers), where PyTorch gives the default float dtype.
Operands of two floating (or two integer) dtypes still promote as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.graph.build import GraphBuilder
from ember.tensor import Tensor
from ember.v1.graph_tensor import GraphTensor

# Ember op -> TF1's op type, for the ops whose operands must not mix integers and floats.
_ARITHMETIC = {
    "add": "AddV2", "sub": "Sub", "mul": "Mul", "div": "RealDiv", "pow": "Pow", "maximum": "Maximum",
    "minimum": "Minimum", "tf_maximum": "Maximum", "tf_minimum": "Minimum", "remainder": "FloorMod",
    "floor_divide": "FloorDiv", "eq": "Equal", "ne": "NotEqual", "lt": "Less", "le": "LessEqual",
    "gt": "Greater", "ge": "GreaterEqual", "atan2": "Atan2",
}


def _kind(x) -> str | None:
    """'i' (integer), 'f' (floating) or None (bool, or not a number) for a tensor or a Python number."""
    if isinstance(x, Tensor):
        k = x._data.dtype.kind
        return "i" if k in "iu" else "f" if k in "fV" else None
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, np.integer)):
        return "int"  # a Python int fits either kind
    if isinstance(x, (float, np.floating)):
        return "float"
    return None


def tf_dtype_rules(op, inputs):
    """New inputs for `op` under TF1's dtype rules (or None to build it as it is); a TypeError where TF refuses."""
    tf_type = _ARITHMETIC.get(op.name)
    if tf_type is None or len(inputs) != 2:
        return None
    x, y = inputs
    kx, ky = _kind(x), _kind(y)
    for (a, ka), (b, kb), arg in (((x, kx), (y, ky), "y"), ((y, ky), (x, kx), "x")):
        if not isinstance(a, Tensor):
            continue
        if ka == "i" and kb in ("f", "float") or ka == "f" and kb == "i":
            other = b.dtype.name if isinstance(b, Tensor) else f"{b!r} of type 'float'"
            raise TypeError(
                f"{tf_type}: TF does not mix integer and floating-point operands: input {arg!r} is {other}, "
                f"the other is {a.dtype.name}; cast one of them with tf.cast"
            )
    if op.name == "div" and {kx, ky} <= {"i", "int"}:
        # TF's truediv of integers: float64 for 32- and 64-bit integers, float32 for narrower ones.
        ints = [t for t in inputs if isinstance(t, Tensor)]
        wide = any(t._data.dtype.itemsize >= 4 for t in ints)
        target = dt.float64 if wide else dt.float32
        return [t.to(target) if isinstance(t, Tensor) else float(t) for t in inputs]
    return None


class V1Builder(GraphBuilder):
    """The graph builder of ember.v1 graphs: TF1's dtype rules, then placement; its outputs are GraphTensors."""

    def outputs(self, tensors) -> None:
        super().outputs(tensors)
        for t in tensors:
            t.__class__ = GraphTensor  # the same slots: TF1's interface on a tensor of this graph

    def prepare(self, op, inputs):
        prepared = tf_dtype_rules(op, inputs)
        if prepared is not None:
            return prepared
        return super().prepare(op, inputs)
