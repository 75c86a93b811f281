"""Elementwise ops beyond the core set: inverse and hyperbolic trig, logaddexp, hypot, copysign,
nextafter, signbit and bit shifts (PyTorch's names; the Array API standard needs them all), and frexp."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import require_float, shape_of, spec
from ember.ops.elementwise import _binary, _unary, _x, eq, exp2, lt, sigmoid, sqrt, where
from ember.ops.opmath import rounded, upcast

asin = _unary("asin", None, lambda c, g: g / sqrt(1.0 - _x(c) * _x(c)), ufunc="arcsin", save_input=True)
acos = _unary("acos", None, lambda c, g: -(g / sqrt(1.0 - _x(c) * _x(c))), ufunc="arccos", save_input=True)
atan = _unary("atan", None, lambda c, g: g / (1.0 + _x(c) * _x(c)), ufunc="arctan", save_input=True)
sinh = _unary("sinh", None, lambda c, g: g * cosh(_x(c)), ufunc="sinh", save_input=True)
cosh = _unary("cosh", None, lambda c, g: g * sinh(_x(c)), ufunc="cosh", save_input=True)
asinh = _unary("asinh", None, lambda c, g: g / sqrt(_x(c) * _x(c) + 1.0), ufunc="arcsinh", save_input=True)
acosh = _unary("acosh", None, lambda c, g: g / sqrt(_x(c) * _x(c) - 1.0), ufunc="arccosh", save_input=True)
atanh = _unary("atanh", None, lambda c, g: g / (1.0 - _x(c) * _x(c)), ufunc="arctanh", save_input=True)
signbit = _unary("signbit", ufunc="signbit", ufunc_kinds="biuf", bool_result=True, float_only=False)
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


def _logaddexp_grad(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    return (g * sigmoid(a - b) if ctx.needs_grad(0) else None, g * sigmoid(b - a) if ctx.needs_grad(1) else None)


def _hypot_grad(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    r = hypot(a, b)
    return (g * a / r if ctx.needs_grad(0) else None, g * b / r if ctx.needs_grad(1) else None)


def _copysign_grad(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    # d/da |a| * sign(b): the sign of a times the sign bit of b (0 where a is 0, as in PyTorch)
    flip = where(signbit(b), -1.0, 1.0) if not isinstance(b, (int, float)) else (-1.0 if b < 0 else 1.0)
    ga = where(eq(a, 0.0), 0.0, g * where(lt(a, 0.0), -1.0, 1.0) * flip) if ctx.needs_grad(0) else None
    return ga, (g * 0.0 if ctx.needs_grad(1) else None)


logaddexp = _binary("logaddexp", None, _logaddexp_grad, ufunc="logaddexp", ufunc_kinds="f", result="float",
                    reads={0: (0, 1), 1: (0, 1)})
hypot = _binary("hypot", None, _hypot_grad, ufunc="hypot", ufunc_kinds="f", result="float",
                reads={0: (0, 1), 1: (0, 1)})
copysign = _binary("copysign", None, _copysign_grad, ufunc="copysign", ufunc_kinds="f", result="float",
                   reads={0: (0, 1), 1: (1,)})
nextafter = _binary("nextafter", ufunc="nextafter", ufunc_kinds="f")  # not differentiable, as in PyTorch
bitwise_left_shift = _binary("bitwise_left_shift", ufunc="left_shift", result="int")
bitwise_right_shift = _binary("bitwise_right_shift", ufunc="right_shift", result="int")



class _FrexpExponent(Op):
    """frexp's exponent: the int32 e with x = m * 2**e, 0.5 <= |m| < 1 (0 for 0, inf and NaN)."""

    name = "frexp_exponent"
    elementwise = True
    differentiable = False

    def infer(self, x):
        return spec(shape_of(x), np.dtype(np.int32))

    def kernel(self, xp, x):
        return xp.frexp(upcast(x))[1].astype(np.int32, copy=False)  # (NumPy has no bfloat16 frexp)


_frexp_exponent = register(_FrexpExponent())
# PyTorch's gradient of the mantissa: grad / 2**exponent
_frexp_mantissa = _unary("frexp_mantissa", lambda xp, x: rounded(xp.frexp(upcast(x))[0], x.dtype),
                         lambda c, g: g / exp2(apply(_frexp_exponent, _x(c)).to(g.dtype)), save_input=True,
                         refuses="int")
FrexpResult = namedtuple("FrexpResult", ["mantissa", "exponent"])


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent and 0.5 <= |mantissa| < 1, the exponent int32, as
    torch.frexp (differentiable in the mantissa)."""
    require_float("frexp", input.dtype.np)
    return FrexpResult(_frexp_mantissa(input), apply(_frexp_exponent, input))


__all__ = [
    "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "asin", "asinh", "atan",
    "atanh", "bitwise_left_shift", "bitwise_right_shift", "copysign", "cosh", "frexp", "hypot", "logaddexp", "nextafter",
    "signbit", "sinh",
]
