"""torch.special's Bessel and Airy functions, erfcx and the Hurwitz zeta, on SciPy's kernels (as special.py's).

i0, i0e, i1, i1e, erfcx and zeta (in its second argument) are differentiable, with PyTorch's gradient rules written
in Ember ops; the Bessel functions under their long names (bessel_j0, modified_bessel_k1, ...), airy_ai and
spherical_bessel_j0 give results without a gradient, as PyTorch's do. SciPy's kernels and PyTorch's are both Cephes's,
with the same values at 0, +-inf and NaN; PyTorch's float64 Bessel and Airy kernels are the less accurate
(docs/errors.md).
"""

from __future__ import annotations

import math

from ember.dispatch import apply
from ember.ops.special import _special

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _i0_grad(ctx, g):
    return (g * i1(ctx.input(0)),)


def _i0e_grad(ctx, g):
    from ember.ops.elementwise import sign

    x = ctx.input(0)
    return (g * (i1e(x) - sign(x) * ctx.output),)


def _at_zero_half(x, value):
    """value where x != 0, and 1/2 (i1's and i1e's derivative there) where x == 0."""
    from ember.ops.elementwise import eq, where

    return where(eq(x, 0.0), 0.5, value)


def _safe(x):
    from ember.ops.elementwise import eq, where

    return where(eq(x, 0.0), 1.0, x)  # a divisor without zeros: the branch where() drops must stay finite


def _i1_grad(ctx, g):
    x = ctx.input(0)
    return (g * _at_zero_half(x, i0(x) - ctx.output / _safe(x)),)


def _i1e_grad(ctx, g):
    from ember.ops.elementwise import sign

    x = ctx.input(0)
    return (g * _at_zero_half(x, i0e(x) - ctx.output * (sign(x) + 1.0 / _safe(x))),)


def _erfcx_grad(ctx, g):
    return (g * (2.0 * ctx.input(0) * ctx.output - _TWO_OVER_SQRT_PI),)


def _zeta_grad(ctx, g):
    if ctx.needs_grad(0):
        raise NotImplementedError("the derivative for 'zeta' is not implemented (with respect to its first "
                                  "argument, as in PyTorch); only the second's is")
    x, q = ctx.input(0), ctx.input(1)
    return None, g * -x * zeta(x + 1.0, q)


_i0 = _special("i0", "i0", 1, _i0_grad)
_i0e = _special("i0e", "i0e", 1, _i0e_grad, save_output=True)
_i1 = _special("i1", "i1", 1, _i1_grad, save_output=True)
_i1e = _special("i1e", "i1e", 1, _i1e_grad, save_output=True)
_erfcx = _special("erfcx", "erfcx", 1, _erfcx_grad, save_output=True)
_zeta = _special("zeta", "zeta", 2, _zeta_grad)

# (op name, SciPy's name): results without a gradient, as PyTorch's
_PLAIN = {name: _special(name, scipy_name, 1, None) for name, scipy_name in (
    ("bessel_j0", "j0"), ("bessel_j1", "j1"), ("bessel_y0", "y0"), ("bessel_y1", "y1"),
    ("modified_bessel_i0", "i0"), ("modified_bessel_i1", "i1"), ("modified_bessel_k0", "k0"),
    ("modified_bessel_k1", "k1"), ("scaled_modified_bessel_k0", "k0e"), ("scaled_modified_bessel_k1", "k1e"))}
_airy_ai = _special("airy_ai", "airy", 1, None, part=0)
_spherical_bessel_j0 = _special("spherical_bessel_j0", "spherical_jn", 1, None)


def i0(input):
    """The modified Bessel function of the first kind, order 0, elementwise (torch.i0)."""
    return apply(_i0, input)


def i0e(input):
    """exp(-|x|) i0(x) elementwise: i0 scaled so that it does not overflow."""
    return apply(_i0e, input)


def i1(input):
    """The modified Bessel function of the first kind, order 1, elementwise."""
    return apply(_i1, input)


def i1e(input):
    """exp(-|x|) i1(x) elementwise."""
    return apply(_i1e, input)


def erfcx(input):
    """The scaled complementary error function exp(x^2) erfc(x), elementwise."""
    return apply(_erfcx, input)


def zeta(input, other):
    """The Hurwitz zeta function sum_k (k + q)^-x of x = input and q = other (differentiable in q only)."""
    return apply(_zeta, input, other)


def bessel_j0(input):
    """The Bessel function of the first kind, order 0, elementwise (no gradient, as PyTorch's)."""
    return apply(_PLAIN["bessel_j0"], input)


def bessel_j1(input):
    """The Bessel function of the first kind, order 1, elementwise (no gradient)."""
    return apply(_PLAIN["bessel_j1"], input)


def bessel_y0(input):
    """The Bessel function of the second kind, order 0, elementwise (no gradient)."""
    return apply(_PLAIN["bessel_y0"], input)


def bessel_y1(input):
    """The Bessel function of the second kind, order 1, elementwise (no gradient)."""
    return apply(_PLAIN["bessel_y1"], input)


def modified_bessel_i0(input):
    """i0 without a gradient, as PyTorch's torch.special.modified_bessel_i0."""
    return apply(_PLAIN["modified_bessel_i0"], input)


def modified_bessel_i1(input):
    """i1 without a gradient, as PyTorch's torch.special.modified_bessel_i1."""
    return apply(_PLAIN["modified_bessel_i1"], input)


def modified_bessel_k0(input):
    """The modified Bessel function of the second kind, order 0, elementwise (no gradient)."""
    return apply(_PLAIN["modified_bessel_k0"], input)


def modified_bessel_k1(input):
    """The modified Bessel function of the second kind, order 1, elementwise (no gradient)."""
    return apply(_PLAIN["modified_bessel_k1"], input)


def scaled_modified_bessel_k0(input):
    """exp(x) k0(x) elementwise (no gradient)."""
    return apply(_PLAIN["scaled_modified_bessel_k0"], input)


def scaled_modified_bessel_k1(input):
    """exp(x) k1(x) elementwise (no gradient)."""
    return apply(_PLAIN["scaled_modified_bessel_k1"], input)


def airy_ai(input):
    """The Airy function Ai elementwise (no gradient)."""
    return apply(_airy_ai, input)


def spherical_bessel_j0(input):
    """The spherical Bessel function of the first kind, order 0 (sin(x) / x, 1 at 0), elementwise (no gradient)."""
    return apply(_spherical_bessel_j0, input, n=0)


__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "erfcx", "i0", "i0e", "i1", "i1e",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "zeta"]
