"""Loss primitives whose edges PyTorch defines by rule, not by calculus: binary_cross_entropy (logs clamped at
-100, a gradient kept finite at p = 0 and 1, probabilities outside [0, 1] refused) and gaussian_nll_loss's
variance (negative entries refused, the rest clamped at eps with the gradient passed through unchanged)."""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import DomainError, DtypeError, ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, spec
from ember.ops.opmath import rounded, upcast

# PyTorch's EPSILON in binary_cross_entropy_backward: the gradient divides by max(p (1 - p), 1e-12), so it is
# finite (about -1e12 for a target of 1) where p is exactly 0 or 1, as sigmoid gives in float32 beyond |x| ~ 17.
_BCE_EPS = 1e-12
_LOG_FLOOR = -100.0


def _check_unit_interval(xp, values, what: str) -> None:
    """Every value in [0, 1] (NaN is not), as PyTorch checks binary_cross_entropy's input and target."""
    if values.size and not bool(xp.all((values >= 0) & (values <= 1))):
        flat = values.reshape(-1)
        bad = flat[~((flat >= 0) & (flat <= 1))][0]
        raise DomainError(f"binary_cross_entropy: all elements of {what} should be between 0 and 1, got {float(bad)} "
                          f"(shape {fmt_shape(values.shape)})")


class BinaryCrossEntropyOp(Op):
    """Per-element -(t log p + (1 - t) log(1 - p)) with each log clamped at -100."""

    name = "binary_cross_entropy"
    fresh_output = True
    save_inputs = (0, 1)

    def infer(self, p, t):
        if p.dtype not in FLOAT_NP:
            raise DtypeError(f"binary_cross_entropy: input must be floating point, got {np.dtype(p.dtype).name}")
        if t.dtype != p.dtype:  # PyTorch's rule: no promotion between probabilities and targets
            raise DtypeError(f"binary_cross_entropy: target must have the input's dtype {np.dtype(p.dtype).name}, "
                             f"got {np.dtype(t.dtype).name}")
        if tuple(t.shape) != tuple(p.shape):
            raise ShapeError(f"binary_cross_entropy: target {fmt_shape(t.shape)} must have the input's shape "
                             f"{fmt_shape(p.shape)}")
        return spec(p.shape, p.dtype)

    def kernel(self, xp, p, t):
        self.infer(p, t)
        _check_unit_interval(xp, p, "input")
        _check_unit_interval(xp, t, "target")
        p32, t32 = upcast(p), upcast(t)
        log_p = xp.maximum(xp.log(p32), _LOG_FLOOR)
        log_q = xp.maximum(xp.log1p(-p32), _LOG_FLOOR)  # log1p: exact where p is tiny, as PyTorch's
        return rounded((t32 - 1) * log_q - t32 * log_p, p.dtype)

    def vjp(self, ctx, g):
        from ember.ops.elementwise import log, log1p, maximum

        p, t = ctx.input(0), ctx.input(1)
        g_p = g * (p - t) / maximum(p * (1.0 - p), _BCE_EPS) if ctx.needs_grad(0) else None
        g_t = g * (log1p(-p) - log(p)) if ctx.needs_grad(1) else None  # -logit(p), as PyTorch's target gradient
        return g_p, g_t


_binary_cross_entropy_op = register(BinaryCrossEntropyOp())


def binary_cross_entropy(input, target):
    """The per-element binary cross-entropy of probabilities `input` against `target` (see the module doc)."""
    return apply(_binary_cross_entropy_op, input, target)


class GaussianVarianceOp(Op):
    """max(var, eps), an error for a negative entry; the gradient passes through as if unclamped."""

    name = "gaussian_nll_variance"
    fresh_output = True

    def infer(self, var, eps):
        return spec(var.shape, var.dtype)

    def kernel(self, xp, var, eps):
        if var.size and bool(xp.any(var < 0)):
            raise DomainError(f"gaussian_nll_loss: var has negative entry/entries (shape {fmt_shape(var.shape)})")
        return xp.maximum(var, var.dtype.type(eps))

    def vjp(self, ctx, g):
        return (g,)


_gaussian_variance_op = register(GaussianVarianceOp())


def gaussian_variance(var, eps: float):
    """gaussian_nll_loss's variance: clamped at eps for stability, with the gradient of var itself."""
    return apply(_gaussian_variance_op, var, eps=float(eps))
