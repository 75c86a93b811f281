"""Elementwise functions composed of other ops (their gradients come from those ops): nan_to_num, fmax/fmin,
heaviside, float_power, logaddexp2, the angle conversions and the signed-infinity tests, with PyTorch's rules; and
`with_zero_gradient_to`, for results that ignore an input's values but not the input."""

from __future__ import annotations

import math

from ember import dtypes as dt
from ember.errors import DtypeError
from ember.ops.creation_ops import ones_like
from ember.ops.elementwise import abs, exp2, isinf, isnan, log1p, logical_or, maximum, mul, pow, sign, where
from ember.type_info import finfo


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default the dtype's largest and smallest
    values); an integer or bool tensor comes back unchanged (a copy)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    limits = finfo(input.dtype)
    posinf = limits.max if posinf is None else posinf
    neginf = limits.min if neginf is None else neginf
    out = where(isnan(input), nan, input)  # (each choice of a number and a tensor keeps the tensor's dtype)
    out = where(isposinf(input), posinf, out)
    return where(isneginf(input), neginf, out)


def sgn(input):
    """sign(x) for real tensors (PyTorch's sgn is x / |x| for complex ones, which Ember does not have)."""
    return sign(input)


def fmax(input, other):
    """The larger of each pair, ignoring NaN (NaN only where both are); a tie's gradient goes to `input`."""
    return where(logical_or(input >= other, isnan(other)), input, other)


def fmin(input, other):
    """The smaller of each pair, ignoring NaN (NaN only where both are); a tie's gradient goes to `input`."""
    return where(logical_or(input <= other, isnan(other)), input, other)


def heaviside(input, values):
    """0 where input < 0, 1 where input > 0, `values` where input == 0 (NaN input gives 0, as in PyTorch)."""
    if getattr(values, "dtype", input.dtype) is not input.dtype:
        raise DtypeError(f"heaviside: input and values must have one dtype, got {input.dtype.name} and "
                         f"{values.dtype.name}")
    return where(input == 0, values, (input > 0).to(input.dtype))


def float_power(input, exponent):
    """input ** exponent computed in float64 (whatever the operands' dtypes), as PyTorch's float_power."""
    cast = [x.to(dt.float64) if hasattr(x, "dtype") else float(x) for x in (input, exponent)]
    return pow(*cast)


def logaddexp2(input, other):
    """log2(2**input + 2**other), without overflow: max + log2(1 + 2**-|input - other|), in base 2 throughout
    (through logaddexp's base e, 1000 and -1 came out 999.99994 in float32)."""
    top = maximum(input, other)
    out = top + log1p(exp2(-abs(input - other))) * (1.0 / math.log(2.0))
    return where(isinf(input) & (input == other), input, out)  # inf and inf: inf, not inf - inf


def deg2rad(input):
    """Degrees to radians (integers give the default float dtype)."""
    return mul(input, math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees (integers give the default float dtype)."""
    return mul(input, 180.0 / math.pi)


def isposinf(input):
    """Where the input is +inf."""
    return isinf(input) & (input > 0)


def isneginf(input):
    """Where the input is -inf."""
    return isinf(input) & (input < 0)


def with_zero_gradient_to(value, source):
    """`value`'s values exactly, with `source` (broadcasting to it) still in the graph with a zero gradient: PyTorch's
    result where an op ignores an input's values (beta=0, a zeroth power, a count) but keeps the input."""
    return where(ones_like(value, dtype=dt.bool_), value, source)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0; at 0 its series 1 - (pi x)**2 / 6, so the derivatives there are exact (the first
    0, the second -pi**2 / 3, where PyTorch's is NaN)."""
    from ember.ops.elementwise import sin

    zero = input == 0
    safe = where(zero, ones_like(input), input) * math.pi
    near = input * math.pi
    return where(zero, 1 - near * near / 6, sin(safe) / safe)


def ldexp(input, other):
    """input * 2**other (a float result)."""
    x = input if input.is_floating_point() else input.float()
    return mul(x, exp2(other if not hasattr(other, "is_floating_point") or other.is_floating_point()
                       else other.to(x.dtype)))


def positive(input):
    """The input itself (an error for bool, as PyTorch's)."""
    if input.dtype == dt.bool_:
        raise DtypeError("positive: not defined for bool tensors")
    return input


def rsub(input, other, alpha=1):
    """other - alpha * input."""
    return other - (input if alpha == 1 else input * alpha)


def renorm(input, p: float, dim: int, maxnorm: float):
    """Each slice along `dim` whose p-norm is above maxnorm, scaled down to maxnorm (maxnorm / (norm + 1e-7))."""
    from ember.ops.reduction import norm

    others = tuple(d for d in range(input.ndim) if d != dim % input.ndim)
    norms = norm(input, p, others, True)
    return input * where(norms > maxnorm, maxnorm / (norms + 1e-7), ones_like(norms))
