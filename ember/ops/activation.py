"""softmax and log_softmax along a dim (float16/bfloat16 compute in float32, forward and backward)."""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply, unary_path
from ember.op import Op, register
from ember.ops._rules import SINGLE_DOUBLE_NP, binary_dtype, float_of, norm_dim, require_float, spec
from ember.ops.opmath import rounded, upcast, upcast_tensor


def _shifted(x, d):
    """x minus its max along d, for float32/float64 NumPy arrays: the ufuncs' reduce methods directly (np.max
    and np.sum are Python wrappers around them, 1-2 us a call on a classifier's small logits)."""
    m = np.maximum.reduce(x, d, None, None, True)
    # As PyTorch: an infinite max is subtracted too, so a row holding +inf (or only -inf) is all NaN.
    with np.errstate(invalid="ignore"):
        return x - m


class _SoftmaxBase(Op):
    save_outputs = (0,)

    def infer(self, x, dim):
        require_float(self.name, x.dtype)  # PyTorch's too: an integer input needs dtype= to say which float
        norm_dim(self.name, dim, len(x.shape))
        return spec(x.shape, float_of(x.dtype))

    def _fast(self, xp, x) -> bool:
        """Whether the direct NumPy path applies: float32/float64 values, at least one dim, not empty."""
        return xp is np and x.dtype in SINGLE_DOUBLE_NP and x.ndim > 0 and x.size > 0

    def _prep(self, xp, x, dim):
        require_float(self.name, x.dtype)
        x = upcast(x.astype(float_of(x.dtype), copy=False))
        d = norm_dim(self.name, dim, x.ndim) if x.ndim else None
        m = xp.max(x, axis=d, keepdims=True) if x.size else x
        # As PyTorch: an infinite max is subtracted too, so a row holding +inf (or only -inf) is all NaN.
        with np.errstate(invalid="ignore"):
            return x - m, d


class SoftmaxOp(_SoftmaxBase):
    name = "softmax"
    fresh_output = True

    def kernel(self, xp, x, dim):
        if self._fast(xp, x):
            d = norm_dim(self.name, dim, x.ndim)
            e = np.exp(_shifted(x, d))
            # no errstate needed (it costs 1 us): each sum holds exp(0) = 1 unless it is NaN, and NaN / NaN is quiet
            e /= np.add.reduce(e, d, None, None, True)
            return e
        z, d = self._prep(xp, x, dim)
        e = xp.exp(z)
        with np.errstate(invalid="ignore"):
            e /= xp.sum(e, axis=d, keepdims=True)
        return rounded(e, float_of(x.dtype))

    def vjp(self, ctx, g):
        from ember.ops.reduction import sum as _sum

        y, g = upcast_tensor(ctx.output), upcast_tensor(g)
        d = ctx.attrs["dim"] if y.ndim else None
        gy = g * y
        return (gy - y * _sum(gy, d, True),)


_softmax_op = register(SoftmaxOp())
_softmax_path = unary_path(_softmax_op)


class LogSoftmaxOp(_SoftmaxBase):
    name = "log_softmax"
    fresh_output = True

    def kernel(self, xp, x, dim):
        if self._fast(xp, x):
            d = norm_dim(self.name, dim, x.ndim)
            z = _shifted(x, d)
            s = np.add.reduce(np.exp(z), d, None, None, True)
            z -= np.log(s, out=s)
            return z
        z, d = self._prep(xp, x, dim)
        return rounded(z - xp.log(xp.sum(xp.exp(z), axis=d, keepdims=True)), float_of(x.dtype))

    def vjp(self, ctx, g):
        return (apply(_log_softmax_backward_op, g, ctx.output, dim=ctx.attrs["dim"]),)


_log_softmax_op = register(LogSoftmaxOp())
_log_softmax_path = unary_path(_log_softmax_op)


class LogSoftmaxBackwardOp(Op):
    """log_softmax's gradient g - exp(y) * sum(g) along `dim`, from the output y, as one op (PyTorch's
    _log_softmax_backward_data): four dispatched ops took 12 us on a classifier's (16, 4) logits."""

    name = "log_softmax_backward"
    fresh_output = True
    save_inputs = (0, 1)

    def infer(self, g, y, dim):
        return spec(y.shape, binary_dtype(g, y))

    def kernel(self, xp, g, y, dim):
        out_dtype = binary_dtype(g, y)
        g, y = upcast(g), upcast(y)  # float16/bfloat16 in float32
        d = dim if y.ndim else None
        s = np.add.reduce(g, d, None, None, True) if xp is np else xp.sum(g, axis=d, keepdims=True)
        return rounded(g - xp.exp(y) * s, out_dtype)

    def vjp(self, ctx, gg):
        from ember.ops.elementwise import exp
        from ember.ops.reduction import sum as _sum

        g, y, gg = upcast_tensor(ctx.input(0)), upcast_tensor(ctx.input(1)), upcast_tensor(gg)
        d = ctx.attrs["dim"] if y.ndim else None
        e = exp(y)
        dg = gg - _sum(gg * e, d, True) if ctx.needs_grad(0) else None
        dy = -(gg * e * _sum(g, d, True)) if ctx.needs_grad(1) else None
        return dg, dy


_log_softmax_backward_op = register(LogSoftmaxBackwardOp())


def _prepare(input, dim, dtype):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:  # PyTorch's legacy implicit dim
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return input, dim


def softmax(input, dim=None, dtype=None, *, axis=None):
    """exp(x) / sum(exp(x)) along `dim`, computed stably."""
    input, dim = _prepare(input, axis if axis is not None else dim, dtype)
    return _softmax_path(input, dim=dim)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """x - logsumexp(x) along `dim`, computed stably."""
    input, dim = _prepare(input, axis if axis is not None else dim, dtype)
    return _log_softmax_path(input, dim=dim)
