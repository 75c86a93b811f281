"""Eval-mode batch norm as two ops: `batch_norm_scale_shift` makes one scale and one shift per channel from
the running statistics, weight and bias, and `channel_affine` applies them, x * scale + shift, in one pass.
Plain eager calls that need no gradient run both kernels as one op, `batch_norm_inference`.

The scale and shift were six ops on C values (add, rsqrt, mul, neg, mul, add): 15-25 us per layer, 0.8-1.3 ms
of MobileNetV2's batch-1 forward; one op computes them with the same NumPy operations, so the same values.
NumPy's broadcast multiply and add made two passes over the input and a temporary: 4.0-4.3 ms on
(32, 64, 56, 56) against 0.85-0.93 ms for one compiled pass on two threads (PyTorch: 0.8 ms), and they
were a third of MobileNetV2's batch-1 inference. The compiled pass (`batch_norm_compiled`) rounds the product
and the sum as NumPy does, so both paths give the same values.
"""

from __future__ import annotations

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply, eager_now, profiled_eager
from ember.errors import ShapeError, fmt_shape
from ember.kernels import batch_norm
from ember.op import OPS, Op, register
from ember.ops._rules import channel_shape, result_dtype, spec
from ember.ops.opmath import opmath, upcast, upcast_tensor


class BatchNormScaleShiftOp(Op):
    """(scale, shift) = (w / sqrt(var + eps), b - mean * scale) per channel; w and b may be None (1 and 0).
    float16/bfloat16 statistics compute in float32 (x * scale and shift nearly cancel far from zero)."""

    name = "batch_norm_scale_shift"
    fresh_output = True
    n_outputs = 2
    grad_reads = {0: (1, 2), 1: (0, 1, 2), 2: (0, 1)}  # the bias's gradient reads nothing

    def infer(self, mean, var, w, b, eps):
        c = mean.shape
        if len(c) != 1:
            raise ShapeError(f"batch_norm: running_mean must be 1-D (C,), got {fmt_shape(mean.shape)}")
        for what, p in (("running_var", var), ("weight", w), ("bias", b)):
            if p is not None and tuple(p.shape) != tuple(c):
                raise ShapeError(f"batch_norm: {what} must have shape {fmt_shape(c)} like running_mean, "
                                 f"got {fmt_shape(p.shape)}")
        dtype = np.result_type(*(opmath(a.dtype) for a in (mean, var, w, b) if a is not None))
        return spec(tuple(c), dtype), spec(tuple(c), dtype)

    def kernel(self, xp, mean, var, w, b, eps):
        # the composite's operations in its order: rsqrt(var + eps) [* w]; -mean * scale [+ b]
        scale = 1 / xp.sqrt(upcast(var) + eps)
        if w is not None:
            scale = scale * upcast(w)
        shift = -upcast(mean) * scale
        if b is not None:
            shift = shift + upcast(b)
        return scale, shift

    def vjp(self, ctx, gscale, gshift):
        from ember.ops.elementwise import rsqrt

        need_mean, need_var, need_w = ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)
        gb = gshift if ctx.needs_grad(3) else None
        if not (need_mean or need_var or need_w):
            return None, None, None, gb
        r = rsqrt(upcast_tensor(ctx.input(1)) + ctx.attrs["eps"])
        w = ctx.input(2) if need_mean or need_var else None  # w's own gradient does not read w
        w = None if w is None else upcast_tensor(w)
        gmean = -(gshift * (r if w is None else r * w)) if need_mean and gshift is not None else None
        gvar = gw = None
        if need_var or need_w:
            total = gscale  # the scale's whole gradient: the shift, -mean * scale, reads it too
            if gshift is not None:
                through_shift = -(gshift * upcast_tensor(ctx.input(0)))
                total = through_shift if total is None else total + through_shift
            if total is not None:
                dr = r * r * r * -0.5  # d rsqrt(var + eps) / d var
                gvar = (total * dr if w is None else total * w * dr) if need_var else None
                gw = total * r if need_w else None
        return gmean, gvar, gw, gb


_batch_norm_scale_shift_op = register(BatchNormScaleShiftOp())


def batch_norm_scale_shift(running_mean, running_var, weight, bias, eps: float):
    """Eval-mode batch norm's per-channel (scale, shift): x * scale + shift normalises x."""
    return apply(_batch_norm_scale_shift_op, running_mean, running_var, weight, bias, eps=float(eps))


class BatchNormInferenceOp(Op):
    """Eval-mode batch norm in one op: batch_norm_scale_shift's kernel, then channel_affine's, so the same values.
    Only `batch_norm_inference` makes it, for plain eager calls that need no gradient; traces, graphs and autograd
    see the two ops, which the jit folds into its neighbours and autodiff differentiates."""

    name = "batch_norm_inference"
    fresh_output = True
    differentiable = False

    def infer(self, x, mean, var, w, b, eps):
        scale, shift = _batch_norm_scale_shift_op.infer(mean, var, w, b, eps)
        return _channel_affine_op.infer(x, scale, shift)

    def kernel(self, xp, x, mean, var, w, b, eps):
        scale, shift = _batch_norm_scale_shift_op.kernel(xp, mean, var, w, b, eps)
        return _channel_affine_op.kernel(xp, x, scale, shift)


_batch_norm_inference_op = register(BatchNormInferenceOp())


def batch_norm_inference(input, running_mean, running_var, weight, bias, eps: float):
    """Eval-mode batch norm of an (N, C, ...) input by its running statistics: one op where the call is plain eager
    NumPy (or under the profiler alone) and needs no gradient, else batch_norm_scale_shift and channel_affine. A
    small layer's scale and shift as an op of their own, with their tensors, cost a third of the layer (MobileNetV2's
    52 at batch 1)."""
    stats = (running_mean, running_var, weight, bias)
    if (eager_now() or profiled_eager() is not None) and type(input._data) is np.ndarray and not (
            grad_state.enabled and (input._requires_grad or any(t is not None and t._requires_grad for t in stats))):
        return apply(_batch_norm_inference_op, input, *stats, eps=float(eps))
    scale, shift = batch_norm_scale_shift(*stats, eps)
    return channel_affine(input, scale, shift)


class ChannelAffineOp(Op):
    """x * scale[c] + shift[c] along dim 1; either may be None (a per-channel scale, or a per-channel shift:
    a convolution's bias, whose add and gradient then cost one pass each).

    `activation` ("relu",) or ("clamp", lo, hi) applies that op to the result in the same pass, and a fourth input
    `residual` (x's shape and dtype, with a scale and a shift) is added before it (a residual block's eval BN + add
    + ReLU): only the jit makes them (graph/passes/fold_activation.py), after autodiff, so such a node has no
    gradient rule."""

    name = "channel_affine"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}  # x's gradient reads the scale, the scale's reads x, the shift's nothing

    def infer(self, x, scale, shift, residual=None, *, activation=None):
        if residual is not None and (tuple(residual.shape) != tuple(x.shape) or residual.dtype != x.dtype
                                     or scale is None or shift is None):
            raise ShapeError(f"channel_affine: the residual added to its output must be the input's shape and dtype "
                             f"{fmt_shape(x.shape)} {x.dtype}, with a scale and a shift; got "
                             f"{fmt_shape(residual.shape)} {residual.dtype}")
        if len(x.shape) < 2:
            raise ShapeError(f"channel_affine: expected input of shape (N, C, ...), got {fmt_shape(x.shape)}")
        if scale is None and shift is None:
            raise ValueError("channel_affine: expected a scale, a shift or both, got neither")
        c = x.shape[1]
        for what, p in (("scale", scale), ("shift", shift)):
            if p is not None and tuple(p.shape) != (c,):
                raise ShapeError(f"channel_affine: {what} must have shape ({c},) for input {fmt_shape(x.shape)}, "
                                 f"got {fmt_shape(p.shape)}")
        return spec(tuple(x.shape), result_dtype(*(a for a in (x, scale, shift) if a is not None)))

    def kernel(self, xp, x, scale, shift, residual=None, *, activation=None):
        fast = batch_norm.channel_affine(xp, x, scale, shift, activation, residual)
        if fast is not None:
            return fast
        if residual is not None:  # add's own kernel, then the activation's: the unfolded graph's values
            out = OPS["add"].kernel(xp, self.kernel(xp, x, scale, shift), residual)
            return out if activation is None else OPS["relu"].kernel(xp, out)
        shape = channel_shape(x.ndim, x.shape[1])
        if scale is None:
            out = x + shift.reshape(shape)
        else:
            out = x * scale.reshape(shape)
        if shift is not None and scale is not None:
            if shift.dtype == out.dtype:
                out += shift.reshape(shape)  # into the product's fresh array: one allocation, not two
            else:
                out = out + shift.reshape(shape)
        if activation is None:
            return out
        if activation[0] == "relu":  # the activation op's own kernel: the unfolded graph's values
            return OPS["relu"].kernel(xp, out)
        return OPS["clamp"].kernel(xp, out, min=activation[1], max=activation[2])

    def vjp(self, ctx, g):
        from ember.ops.elementwise import mul
        from ember.ops.reduction import sum as _sum

        if ctx.attrs.get("activation") is not None or len(ctx.in_meta) > 3:
            raise RuntimeError("channel_affine with a folded activation or residual has no gradient: the jit folds "
                               "them after autodiff has built the backward graph")
        dims = (0,) + tuple(range(2, len(ctx.in_shape(0))))
        gx = None
        if ctx.needs_grad(0):
            scale = ctx.input(1)
            gx = g if scale is None else channel_affine(g, scale)
        gscale = _sum(mul(g, ctx.input(0)), dims) if ctx.needs_grad(1) else None  # a None scale needs none
        gshift = _sum(g, dims) if ctx.needs_grad(2) else None
        return gx, gscale, gshift


_channel_affine_op = register(ChannelAffineOp())


def channel_affine(input, scale, shift=None):
    """input * scale + shift with one scale and one shift per channel (dim 1) of an (N, C, ...) input; a None
    scale or shift is left out."""
    return apply(_channel_affine_op, input, scale, shift)
