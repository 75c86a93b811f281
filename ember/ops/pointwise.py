"""Fused pointwise ops with a scalar coefficient: lerp, addcmul, addcdiv (optimizer updates use them).

Each computes in one pass with PyTorch's rounding order, so an optimizer step matches PyTorch's to
the last bit. The coefficient (`weight`, `value`) is an input, not an attribute: under `ember.jit`
it may be a 0-d graph input (a learning-rate-dependent scalar read at every call). float16 and
bfloat16 compute in float32 and round once, as PyTorch's kernels do.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import DtypeError
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, broadcast_shapes, refuse_mixed, result_dtype, shape_of, spec

_FLOAT32 = np.dtype(np.float32)


def _compute_dtype(dtype):
    """float16/bfloat16 compute in float32 (PyTorch's opmath type); other dtypes in themselves."""
    return _FLOAT32 if dtype in FLOAT_NP and dtype.itemsize == 2 else dtype


def _coefficient(c, dtype):
    """A Python number or 0-d array as a scalar of `dtype` (what NumPy does with a Python number)."""
    if isinstance(c, (int, float, bool)):
        return dtype.type(c)
    return c.astype(dtype, copy=False)


def _check_value(op: str, dtype, value) -> None:
    if dtype.kind in "iub" and isinstance(value, float):
        raise DtypeError(f"{op}: for integer tensors (here {dtype.name}) the value must not be a floating-point number")


def _operands(op: str, *tensors):
    dtype = result_dtype(*tensors)
    shape = broadcast_shapes(op, *(shape_of(t) for t in tensors))
    return shape, dtype


class LerpOp(Op):
    """start + weight * (end - start), with PyTorch's second form for |weight| >= 0.5."""

    name = "lerp"
    grad_reads = {0: (2,), 1: (2,), 2: (0, 1)}

    def infer(self, start, end, weight):
        # PyTorch refuses an end, or a weight tensor with dimensions, of another dtype ("expected dtype float for
        # `end`"); a 0-d weight is a number
        refuse_mixed("lerp", ("input", "end", "weight"), start, end, weight if len(shape_of(weight)) else None)
        shape, dtype = _operands("lerp", start, end)
        if dtype not in FLOAT_NP:
            raise DtypeError(f"lerp: expected floating-point tensors, got {dtype.name}")
        if hasattr(weight, "shape"):
            shape = broadcast_shapes("lerp", shape, tuple(weight.shape))
        return spec(shape, dtype)

    def kernel(self, xp, start, end, weight):
        dtype = self.infer(start, end, weight).dtype
        compute = _compute_dtype(dtype)
        s, e = start.astype(compute, copy=False), end.astype(compute, copy=False)
        w = _coefficient(weight, compute)
        diff = e - s
        if getattr(w, "ndim", 0) == 0:
            out = s + w * diff if abs(w) < 0.5 else e - diff * (compute.type(1) - w)
        else:
            out = xp.where(xp.abs(w) < 0.5, s + w * diff, e - diff * (compute.type(1) - w))
        return xp.asarray(out).astype(dtype, copy=False)

    def vjp(self, ctx, g):
        from ember.ops.elementwise import mul, sub

        w = ctx.input(2) if ctx.needs_grad(0) or ctx.needs_grad(1) else None
        gs = mul(g, 1 - w if isinstance(w, (int, float)) else sub(1, w)) if ctx.needs_grad(0) else None
        ge = mul(g, w) if ctx.needs_grad(1) else None
        gw = mul(g, sub(ctx.input(1), ctx.input(0))) if ctx.needs_grad(2) else None
        return gs, ge, gw


_lerp_op = register(LerpOp())


class _AddcBase(Op):
    """input + value * combine(tensor1, tensor2), in the rounding order (value * t1) op t2."""

    grad_reads = {1: (2, 3), 2: (1, 2, 3)}

    def infer(self, x, t1, t2, value):
        shape, dtype = _operands(self.name, x, t1, t2)
        _check_value(self.name, dtype, value)
        return spec(shape, dtype)

    def kernel(self, xp, x, t1, t2, value):
        dtype = self.infer(x, t1, t2, value).dtype
        compute = _compute_dtype(dtype)
        v = _coefficient(value, compute)
        scaled = v * t1.astype(compute, copy=False)
        out = self.combine(scaled, t2.astype(compute, copy=False)) + x.astype(compute, copy=False)
        return xp.asarray(out).astype(dtype, copy=False)


class AddcmulOp(_AddcBase):
    """input + value * tensor1 * tensor2."""

    name = "addcmul"

    @staticmethod
    def combine(a, b):
        return a * b

    def vjp(self, ctx, g):
        from ember.ops.elementwise import mul

        g1 = mul(g, mul(ctx.input(2), ctx.input(3))) if ctx.needs_grad(1) else None
        g2 = mul(g, mul(ctx.input(1), ctx.input(3))) if ctx.needs_grad(2) else None
        return g, g1, g2, None


_addcmul_op = register(AddcmulOp())


class AddcdivOp(_AddcBase):
    """input + value * tensor1 / tensor2."""

    name = "addcdiv"

    @staticmethod
    def combine(a, b):
        return a / b

    def infer(self, x, t1, t2, value):
        out = super().infer(x, t1, t2, value)
        if out.dtype not in FLOAT_NP:
            raise DtypeError(f"addcdiv: integer division of tensors is not supported, got {out.dtype.name}; use floats")
        return out

    def vjp(self, ctx, g):
        from ember.ops.elementwise import div, mul, neg

        g1 = mul(g, div(ctx.input(3), ctx.input(2))) if ctx.needs_grad(1) else None
        if ctx.needs_grad(2):
            t2 = ctx.input(2)
            g2 = neg(mul(g, div(mul(ctx.input(3), ctx.input(1)), mul(t2, t2))))
        else:
            g2 = None
        return g, g1, g2, None


_addcdiv_op = register(AddcdivOp())


def lerp(input, end, weight):
    """input + weight * (end - input), computed as PyTorch does; weight is a number or a tensor."""
    return apply(_lerp_op, input, end, weight)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    return apply(_addcmul_op, input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    return apply(_addcdiv_op, input, tensor1, tensor2, value)
