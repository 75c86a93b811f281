"""Fused primitives for ember.nn where composing ops costs too many dispatches.

linear is x @ w.T + b as one kernel (instead of transpose, matmul and add, forward and backward).
batch_norm (training statistics) and layer_norm normalise and apply the affine transform in one
kernel, and return their statistics for the backward pass and the running averages. batch_norm's
gradient is the op batch_norm_backward (gx, gw, gb in one kernel, two passes over x and gy) unless
create_graph records it, when it is written in Ember ops so that it differentiates again. With Numba,
batch_norm's forward and backward kernels are compiled loops (ember.kernels.batch_norm).
float16/bfloat16 inputs are computed in float32 (see ember.ops.opmath) and the results rounded
once; the statistics outputs stay float32, so gradients are not computed from rounded statistics.
nll_loss picks -w[t] * logp[n, t] for class-index targets in one kernel. Its gradient is the op
nll_loss_backward (a scatter of the same weights), whose own gradient is nll_loss again — the two
are adjoint linear maps in logp — so every order of derivative stays within these two ops.
"""

from __future__ import annotations

import math

import numpy as np

from ember import dispatch
from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.kernels import batch_norm, elementwise, gemm
from ember.kernels.blas import BIAS_PREFILL_MIN, linear_with_bias
from ember.op import OPS, Op, register
from ember.ops._rules import FLOAT_NP, channel_shape, refuse_mixed, require_float, spec
from ember.ops.elementwise import zeros_like_grad
from ember.ops.opmath import LOW_FLOAT_NP, opmath, rounded, upcast, upcast_tensor
from ember.tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")


# --- batch norm -------------------------------------------------------------------------------
def _channel_sums(a):
    """Float64 sums over every dim but 1 of (N, C, ...): NumPy adds along a strided axis one term at a
    time, which over thousands of rows loses float32 digits (of the mean, say), so each (n, c) row is
    summed first (pairwise, contiguous) and the N partial sums then in float64."""
    a3 = a.reshape(a.shape[0], a.shape[1], _count(a.shape, range(2, a.ndim)))
    part = a3.sum(axis=2) if a3.shape[2] > 1 else a3[:, :, 0]
    return part.sum(axis=0, dtype=np.float64)


class BatchNormOp(Op):
    """Training-mode batch norm over every dim but 1. Outputs (y, mean, biased var), each stat (C,).

    `activation` ("relu",) passes y through relu in the same pass, and a fourth input `residual` (x's shape and
    dtype) is added to y before it (a residual block's BN + add + ReLU): only the jit makes them
    (graph/passes/fold_activation.py), after autodiff, so such a node has no gradient rule."""

    name = "batch_norm"
    fresh_output = True
    n_outputs = 3
    save_inputs = (0, 1)
    save_outputs = (1, 2)

    def infer(self, x, w, b, residual=None, *, eps, activation=None):
        _check_activation(activation)
        if residual is not None and (tuple(residual.shape) != tuple(x.shape) or residual.dtype != x.dtype):
            raise ShapeError(f"batch_norm: the residual added to its output must be the input's shape and dtype "
                             f"{fmt_shape(x.shape)} {x.dtype}, got {fmt_shape(residual.shape)} {residual.dtype}")
        if len(x.shape) < 2:
            raise ShapeError(f"batch_norm: expected input of shape (N, C, ...), got {fmt_shape(x.shape)}")
        c = x.shape[1]
        for name, p in (("weight", w), ("bias", b)):
            if p is not None and tuple(p.shape) != (c,):
                raise ShapeError(f"batch_norm: {name} must have shape ({c},), got {fmt_shape(p.shape)}")
        require_float("batch_norm", x.dtype)
        stat = opmath(x.dtype)
        return spec(tuple(x.shape), x.dtype), spec((c,), stat), spec((c,), stat)

    def kernel(self, xp, x, w, b, residual=None, *, eps, activation=None):
        _check_activation(activation)  # the dispatcher's fast path calls kernels without infer
        require_float("batch_norm", x.dtype)
        fast = batch_norm.batch_norm_forward(xp, x, w, b, eps, then_relu=activation is not None, residual=residual)
        if fast is not None:
            return fast
        if activation is not None or residual is not None:  # add's and relu's own kernels after: the unfolded values
            y, mean, var = self.kernel(xp, x, w, b, eps=eps)
            if residual is not None:
                y = OPS["add"].kernel(xp, y, residual)
            return (y if activation is None else OPS["relu"].kernel(xp, y)), mean, var
        dtype = x.dtype
        x = upcast(x)
        c = x.shape[1]
        n = x.size // c
        shape = channel_shape(x.ndim, c)
        mean = (_channel_sums(x) / n).astype(x.dtype)
        xc = x - mean.reshape(shape)
        var = (_channel_sums(xc * xc) / n).astype(x.dtype)
        scale = 1.0 / xp.sqrt(var + eps)
        if w is not None:
            scale = scale * upcast(w)
        xc *= scale.reshape(shape).astype(x.dtype, copy=False)
        if b is not None:
            xc += upcast(b).reshape(shape).astype(x.dtype, copy=False)
        return rounded(xc, dtype), mean.astype(x.dtype, copy=False), var.astype(x.dtype, copy=False)

    def kernel_out(self, xp, x, w, b, residual=None, *, eps, activation=None, out):
        # y into `out`, a plan's buffer (the statistics are fresh): a jitted step's batch norms then share the
        # arena with the values they outlive or follow, as the relu or add they fold in did
        _check_activation(activation)
        require_float("batch_norm", x.dtype)
        fast = batch_norm.batch_norm_forward(xp, x, w, b, eps, then_relu=activation is not None, residual=residual,
                                             out=out)
        if fast is not None:
            return fast
        y, mean, var = self.kernel(xp, x, w, b, residual, eps=eps, activation=activation)
        out[...] = y
        return out, mean, var

    def vjp(self, ctx, gy, gmean=None, gvar=None):
        if ctx.attrs.get("activation") is not None or len(ctx.in_meta) > 3:
            raise RuntimeError("batch_norm with a folded activation or residual has no gradient: the jit folds them "
                               "after autodiff has built the backward graph")
        x, w, mean, var = ctx.input(0), ctx.input(1), ctx.output_at(1), ctx.output_at(2)
        if grad_state.enabled:  # create_graph: a gradient made of differentiable ops
            gx, gw, gb = _batch_norm_vjp_in_ops(x, w, mean, var, gy, gmean, gvar, ctx.attrs["eps"])
        else:
            gx, gw, gb = apply(_batch_norm_backward_op, x, w, mean, var, gy, gmean, gvar, eps=ctx.attrs["eps"])
            if gy is None:
                gw = gb = None
        return gx, (gw if ctx.needs_grad(1) else None), (gb if ctx.needs_grad(2) else None)


class BatchNormBackwardOp(Op):
    """Gradients (of x, w, b) of batch_norm from those of (y, mean, var); gy, gmean and gvar may be None.

    Outputs (gx, gw, gb); gw and gb are per channel in the statistics' dtype (float32 for float16/bfloat16).
    An eighth input `relu_out` (only the jit gives one: graph/passes/fold_activation.py) first passes gy through
    relu's backward at it, the gradient of a batch_norm whose y went through relu.
    """

    name = "batch_norm_backward"
    n_outputs = 3
    fresh_output = True
    differentiable = False  # under create_graph the ops of _batch_norm_vjp_in_ops are recorded instead

    def infer(self, x, w, mean, var, gy, gmean, gvar, relu_out=None, *, eps):
        if len(x.shape) < 2 or tuple(mean.shape) != (x.shape[1],) or tuple(var.shape) != (x.shape[1],):
            raise ShapeError(f"batch_norm_backward: expected input (N, C, ...) and statistics (C,), got "
                             f"{fmt_shape(x.shape)}, {fmt_shape(mean.shape)} and {fmt_shape(var.shape)}")
        if gy is not None and tuple(gy.shape) != tuple(x.shape):
            raise ShapeError(f"batch_norm_backward: output gradient {fmt_shape(gy.shape)} does not match the "
                             f"input {fmt_shape(x.shape)}")
        _check_relu_out(x, gy, relu_out)
        c, stat = x.shape[1], opmath(x.dtype)
        return spec(tuple(x.shape), x.dtype), spec((c,), stat), spec((c,), stat)

    def kernel(self, xp, x, w, mean, var, gy, gmean, gvar, relu_out=None, *, eps):
        _check_relu_out(x, gy, relu_out)
        fast = batch_norm.batch_norm_backward(xp, x, w, mean, var, gy, gmean, gvar, eps, relu_out)
        if fast is not None:
            return fast
        if relu_out is not None:  # relu's own backward kernel first: the unfolded graph's values
            gy = OPS["relu_backward"].kernel(xp, gy, relu_out)
        dtype = x.dtype
        x = upcast(x)
        acc = x.dtype
        c = x.shape[1]
        n = x.size // c
        shape = channel_shape(x.ndim, c)
        invstd = (1.0 / xp.sqrt(upcast(var).astype(acc, copy=False) + eps)).astype(acc, copy=False)
        k = invstd if w is None else invstd * upcast(w).astype(acc, copy=False)
        xc = x - upcast(mean).astype(acc, copy=False).reshape(shape)
        if gy is not None:
            gy = upcast(gy).astype(acc, copy=False)
            gb = _channel_sums(gy).astype(acc)
            gw_raw = _channel_sums(gy * xc).astype(acc)
            gw = gw_raw * invstd
            a = -(k * invstd * invstd * gw_raw) / n  # gx = k * gy + a * xc + shift, per channel
            shift = -(k * gb) / n
            gx = gy * k.reshape(shape)
        else:
            gw = gb = xp.zeros(c, acc)
            a = shift = xp.zeros(c, acc)
            gx = None
        # the statistics are outputs too (the layers only read them detached, for running averages)
        if gvar is not None:
            a = a + upcast(gvar).astype(acc, copy=False) * (2.0 / n)
        if gmean is not None:
            shift = shift + upcast(gmean).astype(acc, copy=False) / n
        xc *= a.astype(acc, copy=False).reshape(shape)
        if gx is None:
            gx = xc
        else:
            gx += xc
        gx += shift.astype(acc, copy=False).reshape(shape)
        return rounded(gx, dtype), gw.astype(acc, copy=False), gb.astype(acc, copy=False)


def _check_activation(activation) -> None:
    if activation not in (None, ("relu",)):
        raise ValueError(f"batch_norm: the only activation it folds in is ('relu',), got {activation!r}")


def _check_relu_out(x, gy, relu_out) -> None:
    if relu_out is not None and (gy is None or tuple(relu_out.shape) != tuple(x.shape)):
        raise ShapeError(f"batch_norm_backward: relu output {fmt_shape(relu_out.shape)} needs an output gradient "
                         f"of the input's shape {fmt_shape(x.shape)}")


def _batch_norm_vjp_in_ops(x, w, mean, var, gy, gmean, gvar, eps):
    """batch_norm's gradient written in Ember ops (recorded, so it can be differentiated again)."""
    from ember.ops.elementwise import rsqrt
    from ember.ops.reduction import sum as _sum
    from ember.ops.shape import reshape

    # float16/bfloat16: the whole rule runs in float32, the engine rounds each gradient once
    x, w, gy = upcast_tensor(x), upcast_tensor(w), upcast_tensor(gy)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.numel() // c
    shape = channel_shape(x.ndim, c)
    xc = x - reshape(mean, shape)
    gx = gw = gb = None
    if gy is not None:
        invstd = rsqrt(var + eps)
        xhat = xc * reshape(invstd, shape)
        gb = _sum(gy, axes)
        gw = _sum(gy * xhat, axes)
        k = invstd if w is None else invstd * w
        gx = (gy - reshape(gb / n, shape) - xhat * reshape(gw / n, shape)) * reshape(k, shape)
    if gmean is not None:
        gm = reshape(gmean / n, shape)
        gx = gm + zeros_like_grad(x) if gx is None else gx + gm
    if gvar is not None:
        gv = xc * reshape(gvar * (2.0 / n), shape)
        gx = gv if gx is None else gx + gv
    return gx, gw, gb


_batch_norm_op = register(BatchNormOp())
_batch_norm_backward_op = register(BatchNormBackwardOp())


def batch_norm_train(input: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                     eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """Batch-normalised input using this batch's statistics; returns (output, mean, biased variance)."""
    return apply(_batch_norm_op, input, weight, bias, eps=float(eps))


# --- layer norm ---------------------------------------------------------------------------------
class LayerNormOp(Op):
    """Normalise over the trailing `ndims` dims, then scale by w and shift by b (shaped like those dims).

    Outputs (y, mean, rstd); the statistics keep the reduced dims as size 1.
    """

    name = "layer_norm"
    fresh_output = True
    n_outputs = 3
    save_inputs = (0, 1)
    save_outputs = (1, 2)

    def infer(self, x, w, b, ndims, eps):
        if ndims < 1 or len(x.shape) < ndims:
            raise ShapeError(f"layer_norm: cannot normalise the last {ndims} dims of {fmt_shape(x.shape)}")
        tail = tuple(x.shape[len(x.shape) - ndims:])
        for name, p in (("weight", w), ("bias", b)):
            if p is not None and tuple(p.shape) != tail:
                raise ShapeError(f"layer_norm: {name} must have shape {fmt_shape(tail)}, got {fmt_shape(p.shape)}")
        require_float("layer_norm", x.dtype)
        stat = tuple(x.shape[: len(x.shape) - ndims]) + (1,) * ndims
        return spec(tuple(x.shape), x.dtype), spec(stat, opmath(x.dtype)), spec(stat, opmath(x.dtype))

    def kernel(self, xp, x, w, b, ndims, eps):
        from ember.kernels import layer_norm

        fast = layer_norm.forward(xp, x, w, b, ndims, eps)  # float32/float64 with the jit extra
        if fast is not None:
            return fast
        require_float("layer_norm", x.dtype)
        dtype = x.dtype
        x, w, b = upcast(x), None if w is None else upcast(w), None if b is None else upcast(b)
        axes = tuple(range(x.ndim - ndims, x.ndim))
        n = 1
        for a in axes:
            n *= x.shape[a]
        mean = x.sum(axis=axes, keepdims=True, dtype=x.dtype) / n
        xc = x - mean
        var = (xc * xc).sum(axis=axes, keepdims=True, dtype=x.dtype) / n
        rstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        xc *= rstd
        if w is not None:
            xc *= w.astype(x.dtype, copy=False)
        if b is not None:
            xc += b.astype(x.dtype, copy=False)
        return rounded(xc, dtype), mean.astype(x.dtype, copy=False), rstd

    def vjp(self, ctx, gy, gmean=None, grstd=None):
        from ember.ops.reduction import mean as _mean
        from ember.ops.reduction import sum as _sum

        ndims = ctx.attrs["ndims"]
        if gy is not None and gmean is None and grstd is None and not grad_state.enabled:
            from ember.ops.layer_norm_backward import layer_norm_backward_op  # one op (no graph of it recorded)

            gx, gw, gb = apply(layer_norm_backward_op, ctx.input(0), ctx.input(1), ctx.output_at(1), ctx.output_at(2),
                               gy, ndims=ndims)
            return gx, gw if ctx.needs_grad(1) else None, gb if ctx.needs_grad(2) else None
        x, w, gy = upcast_tensor(ctx.input(0)), upcast_tensor(ctx.input(1)), upcast_tensor(gy)
        mean, rstd = ctx.output_at(1), ctx.output_at(2)
        axes = tuple(range(x.ndim - ndims, x.ndim))
        batch = tuple(range(x.ndim - ndims))
        xhat = (x - mean) * rstd
        gx = gw = gb = None
        if gy is not None:
            gw = _sum(gy * xhat, batch) if ctx.needs_grad(1) else None
            gb = _sum(gy, batch) if ctx.needs_grad(2) else None
            gxhat = gy if w is None else gy * w
            gx = (gxhat - _mean(gxhat, axes, True) - xhat * _mean(gxhat * xhat, axes, True)) * rstd
        n = _count(x.shape, axes)
        if gmean is not None:
            gm = gmean * (1.0 / n) + zeros_like_grad(x)
            gx = gm if gx is None else gx + gm
        if grstd is not None:  # d rstd / dx = -rstd^3 (x - mean) / n
            gr = xhat * (grstd * rstd * rstd) * (-1.0 / n)
            gx = gr if gx is None else gx + gr
        return gx, gw, gb


_layer_norm_op = register(LayerNormOp())


def _count(shape, axes) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def layer_norm(input: Tensor, ndims: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """Layer-normalised input over its last `ndims` dims; returns (output, mean, rstd)."""
    return apply(_layer_norm_op, input, weight, bias, ndims=int(ndims), eps=float(eps))


# --- linear ---------------------------------------------------------------------------------
class LinearOp(Op):
    """y = x @ w.T (+ b) for x (..., in), w (out, in), b (out,)."""

    name = "linear"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,), 2: ()}

    def infer(self, x, w, b):
        if len(w.shape) != 2:
            raise ShapeError(f"linear: weight must be 2-D (out, in), got {fmt_shape(w.shape)}")
        if len(x.shape) < 1 or x.shape[-1] != w.shape[1]:
            raise ShapeError(f"linear: input {fmt_shape(x.shape)} does not end in in_features={w.shape[1]} "
                             f"of weight {fmt_shape(w.shape)}")
        if b is not None and tuple(b.shape) != (w.shape[0],):
            raise ShapeError(f"linear: bias must have shape ({w.shape[0]},), got {fmt_shape(b.shape)}")
        refuse_mixed(self.name, ("input", "weight", "bias"), x, w, b)  # PyTorch: "expected ... the same dtype"
        return spec(tuple(x.shape[:-1]) + (w.shape[0],), x.dtype)

    def kernel(self, xp, x, w, b):
        dtype = x.dtype
        if x.dtype != w.dtype or (b is not None and b.dtype != x.dtype) or x.ndim == 0:
            self.infer(x, w, b)  # raises, naming the shapes and dtypes
        if dtype in LOW_FLOAT_NP:  # one float32 product and bias, rounded once
            return rounded(self.kernel(xp, upcast(x), upcast(w), None if b is None else upcast(b)), dtype)
        if b is not None and xp is np and x.ndim and x.flags.c_contiguous and x.shape[-1] and \
                x.size // x.shape[-1] * w.shape[0] >= BIAS_PREFILL_MIN:  # (checked here: small layers skip 0.6 us)
            out = linear_with_bias(_rows(x), w, b)
            if out is not None:
                return out.reshape(x.shape[:-1] + (w.shape[0],))
        if x.ndim > 2 and x.flags.c_contiguous:
            # (B, T, C) @ W.T as one 2-D product: NumPy would otherwise loop over B small GEMMs.
            out = gemm.matmul(_rows(x), w.T, xp=xp).reshape(x.shape[:-1] + (w.shape[0],))
        else:
            out = gemm.matmul(x, w.T, xp=xp)
        if b is not None:
            out += b
        return out

    def kernel_out(self, xp, x, w, b, *, out):
        """x @ w.T + b into out (same dtypes; float16/bfloat16 take the kernel, which sums in float32)."""
        if (type(x) is np.ndarray and type(w) is np.ndarray and x.dtype == w.dtype == out.dtype and x.ndim
                and x.dtype not in LOW_FLOAT_NP and (b is None or (type(b) is np.ndarray and b.dtype == x.dtype))):
            if b is not None and x.flags.c_contiguous and out.flags.c_contiguous and linear_with_bias(
                    _rows(x), w, b, out=_rows(out)) is not None:
                return out  # as the kernel computes it (bias prefilled), so eager and jit agree bit for bit
            gemm.matmul(x, w.T, out=out)
            if b is not None:
                out += b
            return out
        return self.kernel(xp, x, w, b)

    def vjp(self, ctx, g):
        from ember.ops.linalg import matmul
        from ember.ops.reduction import sum as _sum
        from ember.ops.shape import reshape, transpose

        if not grad_state.enabled and type(g._data) is np.ndarray:
            eager = dispatch.eager_now()
            # under the profiler alone, the same path with each product and sum an event: the composite below
            # dispatches reshapes and transposes that eager does not run
            profile = None if eager else dispatch.profiled_eager()
            if eager or profile is not None:
                fast = _linear_grads(ctx, g, profile)
                if fast is not None:
                    return fast
        if ctx.needs_grad(0):
            w = ctx.input(1)
            gx = matmul(g, w) if g.ndim <= 2 else reshape(matmul(reshape(g, (-1, g.shape[-1])), w),
                                                          tuple(g.shape[:-1]) + (w.shape[1],))
        else:
            gx = None
        gw = gb = None
        if ctx.needs_grad(1) or ctx.needs_grad(2):
            g2 = g if g.ndim == 2 else reshape(g, (-1, g.shape[-1]))
            if ctx.needs_grad(1):
                x = ctx.input(0)
                x2 = x if x.ndim == 2 else reshape(x, (-1, x.shape[-1]))
                gw = matmul(transpose(g2, 0, 1), x2)
            if ctx.needs_grad(2):
                gb = _sum(g2, 0)
        return gx, gw, gb


_linear_op = register(LinearOp())


def _linear_grads(ctx, g, profile=None):
    """LinearOp.vjp's products on the arrays themselves, for a float32/float64 gradient in plain eager mode with
    no graph to build (backward without create_graph): the values of the ops the rule dispatches (reshape to
    rows, matmul, transpose, sum over rows), without their four to six dispatches per layer (a tiny MLP's eager
    step: 212 -> 189 us). None: the rule runs instead. Under the profiler (`profile`) each product and sum is an
    event."""
    gd = g._data
    dtype = gd.dtype
    if dtype not in _PLAIN_FLOATS or gd.ndim < 2 or not gd.size:
        return None
    w = ctx.input(1)._data if ctx.needs_grad(0) else None
    x = ctx.input(0)._data if ctx.needs_grad(1) else None
    for a in (w, x):
        if a is not None and (type(a) is not np.ndarray or a.dtype != dtype):
            return None
    g2 = gd if gd.ndim == 2 else gd.reshape((-1, gd.shape[-1]))
    gx = gw = gb = None
    if w is not None:
        gx = gemm.matmul(g2, w) if profile is None else _recorded(profile, "matmul", gemm.matmul, g2, w)
        if gd.ndim > 2:
            gx = gx.reshape(gd.shape[:-1] + (w.shape[1],))
    if x is not None:
        x2 = x if x.ndim == 2 else x.reshape((-1, x.shape[-1]))
        gw = gemm.matmul(g2.T, x2) if profile is None else _recorded(profile, "matmul", gemm.matmul, g2.T, x2)
    if ctx.needs_grad(2):
        gb = _bias_grad(g2) if profile is None else _recorded(profile, "sum", _bias_grad, g2)
    dev = g._device
    return tuple(None if a is None else Tensor._make(a, dev) for a in (gx, gw, gb))


_PLAIN_FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))  # float dtypes computed as they are


def _bias_grad(g2):
    """g2 summed over its rows: split over the threads where large (add.reduce's values bit for bit), else add.reduce."""
    out = elementwise.leading_sum(g2, 1)
    return out if out is not None else np.asarray(np.add.reduce(g2, (0,), g2.dtype, None, False))


def _recorded(profile, name: str, fn, *arrays):
    """fn(*arrays), recorded in `profile` as one `name` event (linear's array gradient under the profiler)."""
    return profile.timed(lambda: fn(*arrays), name, tuple(a.shape for a in arrays), "eager")


def _rows(a):
    """`a` as a matrix of its last dim's rows (sizes spelled out: -1 is ambiguous when the last dim is 0)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias in one op."""
    return apply(_linear_op, input, weight, bias)


def _check(op: str, logp, target, weight, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    if logp.dtype not in FLOAT_NP:
        raise DtypeError(f"{op}: input must be floating point, got {logp.dtype}")
    if target.dtype.kind not in "iu":
        raise DtypeError(f"{op}: target must hold class indices (an integer tensor), got {target.dtype}")
    if len(logp.shape) < 2:
        raise ShapeError(f"{op}: expected input of shape (N, C, ...), got {fmt_shape(logp.shape)}")
    expected = (logp.shape[0],) + tuple(logp.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(f"{op}: expected target of shape {fmt_shape(expected)} for input "
                         f"{fmt_shape(logp.shape)}, got {fmt_shape(target.shape)}")
    if weight is not None and tuple(weight.shape) != (logp.shape[1],):
        raise ShapeError(f"{op}: weight must have shape ({logp.shape[1]},), got {fmt_shape(weight.shape)}")
    refuse_mixed(op, ("input", "weight"), logp, weight)  # PyTorch: "expected scalar type Float but found Double"


_EXACT_COUNT = 1 << 24  # float32 counts the samples exactly below this (the total weight of unit weights)


def _picks(xp, target, n_classes: int, ignore_index: int, weight, dtype):
    """Flat per-sample class indices (ignored ones sent to 0) and per-sample weights (0 when ignored; None
    when every weight is 1: no weight given and no target ignored)."""
    flat = target.reshape(-1)
    if xp is np and flat.size:
        lo, hi = int(np.minimum.reduce(flat)), int(np.maximum.reduce(flat))
        if 0 <= lo and hi < n_classes and not lo <= ignore_index <= hi:  # every target valid, none ignored
            return flat, (None if weight is None else weight.astype(dtype, copy=False)[flat])
    valid = flat != ignore_index
    safe = xp.where(valid, flat, 0)
    if safe.size:
        lo, hi = int(safe.min()), int(safe.max())
        if lo < 0 or hi >= n_classes:
            raise IndexError(f"nll_loss: Target {lo if lo < 0 else hi} is out of bounds for {n_classes} classes.")
    w = valid.astype(dtype) if weight is None else weight.astype(dtype, copy=False)[safe] * valid
    return safe, w


def _class_last(xp, x):
    """(N, C, *) -> (N * prod(*), C): one row of class scores per sample position."""
    if x.ndim == 2:
        return x
    return xp.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


class NllLossOp(Op):
    """Outputs (loss, total weight); the total is what reduction='mean' divides by."""

    name = "nll_loss"
    fresh_output = True
    n_outputs = 2
    save_inputs = (1, 2)
    save_outputs = (1,)

    def infer(self, logp, target, weight, ignore_index, reduction):
        _check(self.name, logp, target, weight, reduction)
        shape = tuple(target.shape) if reduction == "none" else ()
        return spec(shape, logp.dtype), spec((), logp.dtype)

    def kernel(self, xp, logp, target, weight, ignore_index, reduction):
        _check(self.name, logp, target, weight, reduction)
        acc = opmath(logp.dtype)  # float16/bfloat16 losses and weights are summed in float32
        safe, w = _picks(xp, target, logp.shape[1], ignore_index, weight, logp.dtype)
        rows = _class_last(xp, logp)
        picked = upcast(rows[xp.arange(rows.shape[0]), safe])
        if w is None and safe.size < _EXACT_COUNT:  # unit weights: the same values without multiplying by ones
            loss = -picked
            total = acc.type(safe.size)
        else:
            w = upcast(xp.ones(safe.shape, logp.dtype) if w is None else w)
            loss = -(picked * w)
            total = w.sum()
        if reduction == "none":
            out = loss.reshape(target.shape)
        elif reduction == "sum":
            out = loss.sum(dtype=acc)
        elif total:
            out = loss.sum(dtype=acc) / total
        else:
            out = xp.full((), float("nan"), dtype=acc)  # an all-ignored batch, as in PyTorch
        return xp.asarray(rounded(xp.asarray(out), logp.dtype)), xp.asarray(rounded(xp.asarray(total), logp.dtype))

    def vjp(self, ctx, g, _g_total=None):
        a = ctx.attrs
        gx = apply(_nll_loss_backward_op, g, ctx.input(1), ctx.input(2), ctx.output_at(1),
                   ignore_index=a["ignore_index"], reduction=a["reduction"], in_shape=ctx.in_shape(0))
        return gx, None, None


_nll_loss_op = register(NllLossOp())


class NllLossBackwardOp(Op):
    """d nll_loss / d logp: -w[t] * g (divided by the total weight for 'mean') at each target class."""

    name = "nll_loss_backward"
    fresh_output = True
    save_inputs = (1, 2)

    def infer(self, g, target, weight, total, ignore_index, reduction, in_shape):
        return spec(tuple(in_shape), g.dtype)

    def kernel(self, xp, g, target, weight, total, ignore_index, reduction, in_shape):
        n_classes = in_shape[1]
        safe, w = _picks(xp, target, n_classes, ignore_index, weight, g.dtype)
        if w is None:  # unit weights: the products below are these values times one
            w = xp.ones(safe.shape, g.dtype) if not total else None
        if reduction == "none":
            coef = -g.reshape(-1) if w is None else -(g.reshape(-1) * w)
        elif reduction == "sum":
            coef = -g if w is None else -(g * w)
        elif total:
            coef = -(g / total) if w is None else -((g / total) * w)
        else:  # every target ignored: PyTorch leaves the gradient at zero
            coef = xp.zeros(w.shape, dtype=g.dtype)
        moved = (in_shape[0],) + tuple(in_shape[2:]) + (n_classes,)
        out = xp.zeros(moved, dtype=g.dtype)
        rows = out.reshape(-1, n_classes)
        rows[xp.arange(rows.shape[0]), safe] = coef
        return out if len(in_shape) == 2 else xp.ascontiguousarray(xp.moveaxis(out, -1, 1))

    def vjp(self, ctx, gg):
        a = ctx.attrs
        loss, _ = apply(_nll_loss_op, gg, ctx.input(1), ctx.input(2), ignore_index=a["ignore_index"],
                        reduction=a["reduction"])
        return loss, None, None, None


_nll_loss_backward_op = register(NllLossBackwardOp())


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices `target` under log-probabilities `input` (N, C, ...)."""
    loss, _ = apply(_nll_loss_op, input, target, weight, ignore_index=int(ignore_index), reduction=reduction)
    return loss
