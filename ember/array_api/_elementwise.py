"""Elementwise functions with the standard's names, positional-only operands and type promotion."""

from __future__ import annotations

import math

from ember import ops
from ember.array_api._helpers import check_array, promote_pair
from ember.tensor import Tensor


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


abs = _unary("abs", ops.abs)  # noqa: A001  (the standard's names shadow builtins here)
acos = _unary("acos", ops.acos)
acosh = _unary("acosh", ops.acosh)
asin = _unary("asin", ops.asin)
asinh = _unary("asinh", ops.asinh)
atan = _unary("atan", ops.atan)
atanh = _unary("atanh", ops.atanh)
bitwise_invert = _unary("bitwise_invert", ops.bitwise_not)
ceil = _unary("ceil", ops.ceil)
cos = _unary("cos", ops.cos)
cosh = _unary("cosh", ops.cosh)
exp = _unary("exp", ops.exp)
expm1 = _unary("expm1", ops.expm1)
floor = _unary("floor", ops.floor)
isfinite = _unary("isfinite", ops.isfinite)
isinf = _unary("isinf", ops.isinf)
isnan = _unary("isnan", ops.isnan)
log = _unary("log", ops.log)
log1p = _unary("log1p", ops.log1p)
log2 = _unary("log2", ops.log2)
log10 = _unary("log10", ops.log10)
logical_not = _unary("logical_not", ops.logical_not)
negative = _unary("negative", ops.neg)
positive = _unary("positive", lambda x: +x)
round = _unary("round", ops.round)  # noqa: A001
sign = _unary("sign", ops.sign)
signbit = _unary("signbit", ops.signbit)
sin = _unary("sin", ops.sin)
sinh = _unary("sinh", ops.sinh)
sqrt = _unary("sqrt", ops.sqrt)
square = _unary("square", ops.square)
tan = _unary("tan", ops.tan)
tanh = _unary("tanh", ops.tanh)
trunc = _unary("trunc", ops.trunc)
# Ember has no complex dtypes: on real arrays these are the identity, zeros, and the identity.
reciprocal = _unary("reciprocal", ops.reciprocal)
real = _unary("real", lambda x: ops.clone(x))
imag = _unary("imag", lambda x: ops.zeros_like(x))
conj = _unary("conj", lambda x: ops.clone(x))

add = _binary("add", ops.add)
atan2 = _binary("atan2", ops.atan2)
bitwise_and = _binary("bitwise_and", ops.bitwise_and)
bitwise_left_shift = _binary("bitwise_left_shift", ops.bitwise_left_shift)
bitwise_or = _binary("bitwise_or", ops.bitwise_or)
bitwise_right_shift = _binary("bitwise_right_shift", ops.bitwise_right_shift)
bitwise_xor = _binary("bitwise_xor", ops.bitwise_xor)
copysign = _binary("copysign", ops.copysign)
divide = _binary("divide", ops.div)
equal = _binary("equal", ops.eq)


def _floor_divide(a, b):
    out = ops.floor_divide(a, b)
    if not out.dtype.is_floating_point:
        return out
    # The standard's special cases where PyTorch's (and NumPy's) floor differ: inf // 2 is inf, not NaN,
    # and -1 // inf is -0, not -1. Where exactly one operand is infinite, the true quotient is the answer.
    one_inf = ops.logical_xor(ops.isinf(a) if isinstance(a, Tensor) else math.isinf(a),
                                ops.isinf(b) if isinstance(b, Tensor) else math.isinf(b))
    return ops.where(one_inf, ops.div(a, b).to(out.dtype), out)


floor_divide = _binary("floor_divide", _floor_divide)
greater = _binary("greater", ops.gt)
greater_equal = _binary("greater_equal", ops.ge)
hypot = _binary("hypot", ops.hypot)
less = _binary("less", ops.lt)
less_equal = _binary("less_equal", ops.le)
logaddexp = _binary("logaddexp", ops.logaddexp)
logical_and = _binary("logical_and", ops.logical_and)
logical_or = _binary("logical_or", ops.logical_or)
logical_xor = _binary("logical_xor", ops.logical_xor)
maximum = _binary("maximum", ops.maximum)
minimum = _binary("minimum", ops.minimum)
multiply = _binary("multiply", ops.mul)
nextafter = _binary("nextafter", ops.nextafter)
not_equal = _binary("not_equal", ops.ne)
pow = _binary("pow", ops.pow)  # noqa: A001
remainder = _binary("remainder", ops.remainder)
subtract = _binary("subtract", ops.sub)


def clip(x, /, min=None, max=None):  # noqa: A002  (the standard's parameter names)
    """x limited to [min, max] elementwise; the result keeps x's dtype."""
    check_array("clip", x)
    if min is None and max is None:
        return ops.clone(x)
    out = ops.clamp(x, min, max)
    return out if out.dtype is x.dtype else out.to(x.dtype)
