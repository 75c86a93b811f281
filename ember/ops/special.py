"""Special functions (torch.special's and scipy.special's): lgamma, digamma, polygamma, gamma, erfc, erfinv,
ndtr, log_ndtr, ndtri, entr, gammainc, gammaincc, xlogy and xlog1py.

Kernels are SciPy's (`scipy.special`, or CuPy's on CUDA), imported when first needed; without SciPy an op
raises ImportError naming itself. Integer inputs compute in the default float (as PyTorch), float16 and
bfloat16 in float32, rounded once. Gradient rules are written in Ember ops, so they differentiate again.
"""

from __future__ import annotations

import math

import numpy as np

from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import broadcast_shapes, float_of, result_dtype, shape_of, spec
from ember.ops.opmath import rounded, upcast

_SQRT_2PI = math.sqrt(2 * math.pi)
_SQRT_PI = math.sqrt(math.pi)


def _scipy_special(xp, op: str):
    """scipy.special (cupyx.scipy.special on CUDA), or an ImportError naming the op."""
    if xp is not np:
        import cupyx.scipy.special as special

        return special
    try:
        import scipy.special as special
    except ImportError:
        raise ImportError(f"{op}: the kernel is SciPy's; install SciPy (pip install scipy, or ember[scipy])") from None
    return special


class SpecialOp(Op):
    """An elementwise special function of one or two tensor inputs (Python numbers allowed), by SciPy's name;
    not differentiable where `grad` is None."""

    elementwise = True

    def __init__(self, name: str, scipy_name: str, arity: int, grad, *, save_output: bool = False,
                 part: int | None = None) -> None:
        self.name = name
        self.scipy_name = scipy_name
        self.arity = arity
        self.grad = grad
        self.differentiable = grad is not None  # PyTorch gives the Bessel functions' results no gradient
        self.part = part  # which of SciPy's results is the op's, where SciPy returns several (airy)
        self.save_inputs = tuple(range(arity))
        self.save_outputs = (0,) if save_output else ()

    def infer(self, *xs, **attrs):
        shape = broadcast_shapes(self.name, *(shape_of(x) for x in xs))
        return spec(shape, float_of(result_dtype(*xs)))

    def kernel(self, xp, *xs, **attrs):
        dtype = float_of(result_dtype(*xs))
        args = [upcast(x.astype(dtype, copy=False)) if hasattr(x, "dtype") else x for x in xs]
        fn = getattr(_scipy_special(xp, self.name), self.scipy_name)
        consts = attrs.values() if xp is np else [xp.asarray(c) for c in attrs.values()]  # cupyx wants arrays
        with np.errstate(all="ignore"):  # poles and the ends of the domain give inf/NaN quietly, as PyTorch
            out = fn(*consts, *args)
        if self.part is not None:
            out = out[self.part]
        return rounded(xp.asarray(out), dtype)

    def vjp(self, ctx, g):
        return self.grad(ctx, g)


def _special(name: str, scipy_name: str, arity: int, grad, **kw):
    op = register(SpecialOp(name, scipy_name, arity, grad, **kw))
    return op


# --- the gradient rules ----------------------------------------------------------------------------------------
def _x(ctx, i: int = 0):
    return ctx.input(i)


def _lgamma_grad(ctx, g):
    return (g * digamma(_x(ctx)),)


def _digamma_grad(ctx, g):
    return (g * polygamma(1, _x(ctx)),)


def _polygamma_grad(ctx, g):
    return (g * polygamma(ctx.attrs["n"] + 1, _x(ctx)),)


def _gamma_grad(ctx, g):
    return (g * ctx.output * digamma(_x(ctx)),)


def _erfc_grad(ctx, g):
    from ember.ops.elementwise import exp

    x = _x(ctx)
    return (g * (-2.0 / _SQRT_PI) * exp(-(x * x)),)


def _erfinv_grad(ctx, g):
    from ember.ops.elementwise import exp

    y = ctx.output
    return (g * (_SQRT_PI / 2.0) * exp(y * y),)


def _ndtr_grad(ctx, g):
    from ember.ops.elementwise import exp

    x = _x(ctx)
    return (g * exp(x * x * -0.5) / _SQRT_2PI,)


def _log_ndtr_grad(ctx, g):
    from ember.ops.elementwise import exp

    x = _x(ctx)
    return (g * exp(x * x * -0.5 - ctx.output) / _SQRT_2PI,)


def _ndtri_grad(ctx, g):
    from ember.ops.elementwise import exp

    y = ctx.output
    return (g * _SQRT_2PI * exp(y * y * 0.5),)


def _entr_grad(ctx, g):
    from ember.ops.elementwise import log

    return (-g * (log(_x(ctx)) + 1.0),)


def _gammainc_grad(sign: float):
    def grad(ctx, g):
        from ember.ops.elementwise import exp, log

        if ctx.needs_grad(0):
            raise NotImplementedError(f"{ctx.op.name}: the derivative with respect to a (the shape) is not "
                                      "implemented, as in PyTorch and HIPS autograd; only x's is")
        a, x = ctx.input(0), ctx.input(1)
        # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)
        return None, g * (sign * exp(-x + (a - 1) * log(x) - lgamma(a)))

    return grad


def _xlogy_grad(log_fn, shift: float):
    """The gradient of x * log_fn(y), where log_fn(y) is log(y + shift)."""

    def grad(ctx, g):
        from ember.ops.elementwise import ne, where

        x, y = ctx.input(0), ctx.input(1)
        gx = g * where(ne(x, 0), log_fn(y), 0.0) if ctx.needs_grad(0) else None
        gy = g * x / (y + shift if shift else y) if ctx.needs_grad(1) else None
        return gx, gy

    return grad


def _log(y):
    from ember.ops.elementwise import log

    return log(y)


def _log1p(y):
    from ember.ops.elementwise import log1p

    return log1p(y)


_lgamma = _special("lgamma", "gammaln", 1, _lgamma_grad)
_digamma = _special("digamma", "digamma", 1, _digamma_grad)
_polygamma = _special("polygamma", "polygamma", 1, _polygamma_grad)
_gamma = _special("gamma", "gamma", 1, _gamma_grad, save_output=True)
_erfc = _special("erfc", "erfc", 1, _erfc_grad)
_erfinv = _special("erfinv", "erfinv", 1, _erfinv_grad, save_output=True)
_ndtr = _special("ndtr", "ndtr", 1, _ndtr_grad)
_log_ndtr = _special("log_ndtr", "log_ndtr", 1, _log_ndtr_grad, save_output=True)
_ndtri = _special("ndtri", "ndtri", 1, _ndtri_grad, save_output=True)
_entr = _special("entr", "entr", 1, _entr_grad)
_gammainc = _special("gammainc", "gammainc", 2, _gammainc_grad(1.0))
_gammaincc = _special("gammaincc", "gammaincc", 2, _gammainc_grad(-1.0))
_xlogy = _special("xlogy", "xlogy", 2, _xlogy_grad(_log, 0.0))
_xlog1py = _special("xlog1py", "xlog1py", 2, _xlogy_grad(_log1p, 1.0))


def lgamma(input):
    """log|Gamma(x)| elementwise (scipy's gammaln)."""
    return apply(_lgamma, input)


def digamma(input):
    """d/dx log Gamma(x) elementwise (psi)."""
    return apply(_digamma, input)


def polygamma(n: int, input):
    """The n-th derivative of digamma, elementwise."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative integer, got {n!r}")
    return apply(_polygamma, input, n=int(n))


def gamma(input):
    """Gamma(x) elementwise."""
    return apply(_gamma, input)


def erfc(input):
    """1 - erf(x) elementwise, accurate where erf(x) is near 1."""
    return apply(_erfc, input)


def erfinv(input):
    """The inverse of erf on (-1, 1) elementwise (+-inf at +-1)."""
    return apply(_erfinv, input)


def ndtr(input):
    """The standard normal distribution function elementwise."""
    return apply(_ndtr, input)


def log_ndtr(input):
    """log of the standard normal distribution function, accurate far into the lower tail."""
    return apply(_log_ndtr, input)


def ndtri(input):
    """The inverse of ndtr (the standard normal quantile function) elementwise."""
    return apply(_ndtri, input)


def entr(input):
    """-x log x elementwise (0 at 0, -inf for negative x)."""
    return apply(_entr, input)


def gammainc(input, other):
    """The regularised lower incomplete gamma function P(a, x) (differentiable in x only)."""
    return apply(_gammainc, input, other)


def gammaincc(input, other):
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x) (differentiable in x only)."""
    return apply(_gammaincc, input, other)


def xlogy(input, other):
    """x * log(y), and 0 where x is 0 (also where y is 0)."""
    return apply(_xlogy, input, other)


def xlog1py(input, other):
    """x * log1p(y), and 0 where x is 0."""
    return apply(_xlog1py, input, other)


def logit(input, eps: float | None = None):
    """log(p / (1 - p)) elementwise, with p clamped to [eps, 1 - eps] when eps is given (as torch.logit)."""
    from ember.ops.elementwise import clamp, log

    x = input if eps is None else clamp(input, eps, 1.0 - eps)
    return log(x / (1.0 - x))


__all__ = ["digamma", "entr", "erfc", "erfinv", "gamma", "gammainc", "gammaincc", "lgamma", "log_ndtr", "logit",
           "ndtr", "ndtri", "polygamma", "xlog1py", "xlogy"]
