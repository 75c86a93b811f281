"""Elementwise math, comparisons and arithmetic methods (x.exp() is ember.exp(x))."""

from __future__ import annotations

from ember import ops
from ember.mixins.op_method import op_method


class MathMixin:
    """Elementwise math, comparisons and arithmetic methods of `ember.Tensor`."""

    __slots__ = ()

    exp = op_method()
    exp2 = op_method()
    log = op_method()
    log2 = op_method()
    log10 = op_method()
    log1p = op_method()
    expm1 = op_method()
    sqrt = op_method()
    rsqrt = op_method()
    sin = op_method()
    cos = op_method()
    tan = op_method()
    tanh = op_method()
    sigmoid = op_method()
    relu = op_method()
    abs = op_method()
    sign = op_method()
    sgn = op_method()
    nan_to_num = op_method()
    gcd = op_method()
    lcm = op_method()
    sinc = op_method()
    ldexp = op_method()
    renorm = op_method()
    fix = op_method()
    positive = op_method()
    absolute = op_method()
    arctan2 = op_method()
    cross = op_method()
    take = op_method()
    index_copy = op_method()
    index_fill = op_method()
    masked_scatter = op_method()
    select_scatter = op_method()
    slice_scatter = op_method()
    diagonal_scatter = op_method()
    adjoint = op_method()
    ravel = op_method()
    hsplit = op_method()
    vsplit = op_method()
    dsplit = op_method()
    is_nonzero = op_method()
    is_same_size = op_method()
    is_complex = op_method()
    is_signed = op_method()
    fmax = op_method()
    fmin = op_method()
    acos = op_method()
    acosh = op_method()
    asin = op_method()
    asinh = op_method()
    atan = op_method()
    atanh = op_method()
    arccos = op_method()
    arccosh = op_method()
    arcsin = op_method()
    arcsinh = op_method()
    arctan = op_method()
    arctanh = op_method()
    cosh = op_method()
    sinh = op_method()
    hypot = op_method()
    logaddexp = op_method()
    copysign = op_method()
    nextafter = op_method()
    signbit = op_method()
    bitwise_left_shift = op_method()
    bitwise_right_shift = op_method()
    ger = op_method()
    heaviside = op_method()
    float_power = op_method()
    logaddexp2 = op_method()
    deg2rad = op_method()
    rad2deg = op_method()
    isposinf = op_method()
    isneginf = op_method()
    neg = op_method()
    negative = op_method()
    reciprocal = op_method()
    floor = op_method()
    ceil = op_method()
    trunc = op_method()
    round = op_method()
    frac = op_method()
    erf = op_method()
    square = op_method()
    isnan = op_method()
    isinf = op_method()
    isfinite = op_method()
    logical_not = op_method()
    logical_and = op_method()
    logical_or = op_method()
    logical_xor = op_method()
    bitwise_not = op_method()
    bitwise_and = op_method()
    bitwise_or = op_method()
    bitwise_xor = op_method()
    maximum = op_method()
    minimum = op_method()
    pow = op_method()
    remainder = op_method()
    fmod = op_method()
    floor_divide = op_method()
    atan2 = op_method()
    lerp = op_method()
    addcmul = op_method()
    addcdiv = op_method()
    eq = op_method()
    ne = op_method()
    lt = op_method()
    le = op_method()
    gt = op_method()
    ge = op_method()
    greater = op_method()
    less = op_method()
    greater_equal = op_method()
    less_equal = op_method()
    not_equal = op_method()
    equal = op_method()

    def lgamma(self):
        """`ember.lgamma(self)`."""
        return ops.lgamma(self)

    def digamma(self):
        """`ember.digamma(self)`."""
        return ops.digamma(self)

    def polygamma(self, n: int):
        """`ember.polygamma(n, self)` (PyTorch's method puts n first too)."""
        return ops.polygamma(n, self)

    def erfc(self):
        """`ember.erfc(self)`."""
        return ops.erfc(self)

    def erfinv(self):
        """`ember.erfinv(self)`."""
        return ops.erfinv(self)

    i0 = op_method()
    frexp = op_method()
    as_strided = op_method()

    logit = op_method()

    def xlogy(self, other):
        """`ember.xlogy(self, other)`."""
        return ops.xlogy(self, other)

    isclose = op_method()
    allclose = op_method()
    clamp = op_method()
    clip = op_method()
    clamp_min = op_method()
    clamp_max = op_method()
    add = op_method()
    sub = op_method()
    subtract = op_method()
    div = op_method()
    divide = op_method()
    true_divide = op_method()
    mul = op_method()
    multiply = op_method()

    def where(self, condition, other):
        """`ember.where(condition, self, other)`."""
        return ops.where(condition, self, other)
