"""Elementwise functions with the standard's names, positional-only operands and type promotion."""

from __future__ import annotations

import math

import ember
from ember.array_api._helpers import check_array, promote_pair


def _unary(name, fn):
    def f(x, /):
        return fn(check_array(name, x))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(x)."
    return f


def _binary(name, fn):
    def f(x1, x2, /):
        return fn(*promote_pair(name, x1, x2))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(x1, x2) with broadcasting and the standard's type promotion."
    return f


abs = _unary("abs", ember.abs)  # noqa: A001  (the standard's names shadow builtins here)
acos = _unary("acos", ember.acos)
acosh = _unary("acosh", ember.acosh)
asin = _unary("asin", ember.asin)
asinh = _unary("asinh", ember.asinh)
atan = _unary("atan", ember.atan)
atanh = _unary("atanh", ember.atanh)
bitwise_invert = _unary("bitwise_invert", ember.bitwise_not)
ceil = _unary("ceil", ember.ceil)
cos = _unary("cos", ember.cos)
cosh = _unary("cosh", ember.cosh)
exp = _unary("exp", ember.exp)
expm1 = _unary("expm1", ember.expm1)
floor = _unary("floor", ember.floor)
isfinite = _unary("isfinite", ember.isfinite)
isinf = _unary("isinf", ember.isinf)
isnan = _unary("isnan", ember.isnan)
log = _unary("log", ember.log)
log1p = _unary("log1p", ember.log1p)
log2 = _unary("log2", ember.log2)
log10 = _unary("log10", ember.log10)
logical_not = _unary("logical_not", ember.logical_not)
negative = _unary("negative", ember.neg)
positive = _unary("positive", lambda x: +x)
round = _unary("round", ember.round)  # noqa: A001
sign = _unary("sign", ember.sign)
signbit = _unary("signbit", ember.signbit)
sin = _unary("sin", ember.sin)
sinh = _unary("sinh", ember.sinh)
sqrt = _unary("sqrt", ember.sqrt)
square = _unary("square", ember.square)
tan = _unary("tan", ember.tan)
tanh = _unary("tanh", ember.tanh)
trunc = _unary("trunc", ember.trunc)
# Ember has no complex dtypes: on real arrays these are the identity, zeros, and the identity.
reciprocal = _unary("reciprocal", ember.reciprocal)
real = _unary("real", lambda x: ember.clone(x))
imag = _unary("imag", lambda x: ember.zeros_like(x))
conj = _unary("conj", lambda x: ember.clone(x))

add = _binary("add", ember.add)
atan2 = _binary("atan2", ember.atan2)
bitwise_and = _binary("bitwise_and", ember.bitwise_and)
bitwise_left_shift = _binary("bitwise_left_shift", ember.bitwise_left_shift)
bitwise_or = _binary("bitwise_or", ember.bitwise_or)
bitwise_right_shift = _binary("bitwise_right_shift", ember.bitwise_right_shift)
bitwise_xor = _binary("bitwise_xor", ember.bitwise_xor)
copysign = _binary("copysign", ember.copysign)
divide = _binary("divide", ember.div)
equal = _binary("equal", ember.eq)


def _floor_divide(a, b):
    out = ember.floor_divide(a, b)
    if not out.dtype.is_floating_point:
        return out
    # The standard's special cases where PyTorch's (and NumPy's) floor differ: inf // 2 is inf, not NaN,
    # and -1 // inf is -0, not -1. Where exactly one operand is infinite, the true quotient is the answer.
    one_inf = ember.logical_xor(ember.isinf(a) if isinstance(a, ember.Tensor) else math.isinf(a),
                                ember.isinf(b) if isinstance(b, ember.Tensor) else math.isinf(b))
    return ember.where(one_inf, ember.div(a, b).to(out.dtype), out)


floor_divide = _binary("floor_divide", _floor_divide)
greater = _binary("greater", ember.gt)
greater_equal = _binary("greater_equal", ember.ge)
hypot = _binary("hypot", ember.hypot)
less = _binary("less", ember.lt)
less_equal = _binary("less_equal", ember.le)
logaddexp = _binary("logaddexp", ember.logaddexp)
logical_and = _binary("logical_and", ember.logical_and)
logical_or = _binary("logical_or", ember.logical_or)
logical_xor = _binary("logical_xor", ember.logical_xor)
maximum = _binary("maximum", ember.maximum)
minimum = _binary("minimum", ember.minimum)
multiply = _binary("multiply", ember.mul)
nextafter = _binary("nextafter", ember.nextafter)
not_equal = _binary("not_equal", ember.ne)
pow = _binary("pow", ember.pow)  # noqa: A001
remainder = _binary("remainder", ember.remainder)
subtract = _binary("subtract", ember.sub)


def clip(x, /, min=None, max=None):  # noqa: A002  (the standard's parameter names)
    """x limited to [min, max] elementwise; the result keeps x's dtype."""
    check_array("clip", x)
    if min is None and max is None:
        return ember.clone(x)
    out = ember.clamp(x, min, max)
    return out if out.dtype is x.dtype else out.to(x.dtype)
