"""Elementwise math, comparisons and arithmetic methods (x.exp() is ember.exp(x))."""

from __future__ import annotations

import ember


class MathMixin:
    """Elementwise math, comparisons and arithmetic methods of `ember.Tensor`."""

    __slots__ = ()

    def exp(self, *args, **kwargs):
        """`ember.exp(self, ...)`."""
        return ember.ops.exp(self, *args, **kwargs)

    def exp2(self, *args, **kwargs):
        """`ember.exp2(self, ...)`."""
        return ember.ops.exp2(self, *args, **kwargs)

    def log(self, *args, **kwargs):
        """`ember.log(self, ...)`."""
        return ember.ops.log(self, *args, **kwargs)

    def log2(self, *args, **kwargs):
        """`ember.log2(self, ...)`."""
        return ember.ops.log2(self, *args, **kwargs)

    def log10(self, *args, **kwargs):
        """`ember.log10(self, ...)`."""
        return ember.ops.log10(self, *args, **kwargs)

    def log1p(self, *args, **kwargs):
        """`ember.log1p(self, ...)`."""
        return ember.ops.log1p(self, *args, **kwargs)

    def expm1(self, *args, **kwargs):
        """`ember.expm1(self, ...)`."""
        return ember.ops.expm1(self, *args, **kwargs)

    def sqrt(self, *args, **kwargs):
        """`ember.sqrt(self, ...)`."""
        return ember.ops.sqrt(self, *args, **kwargs)

    def rsqrt(self, *args, **kwargs):
        """`ember.rsqrt(self, ...)`."""
        return ember.ops.rsqrt(self, *args, **kwargs)

    def sin(self, *args, **kwargs):
        """`ember.sin(self, ...)`."""
        return ember.ops.sin(self, *args, **kwargs)

    def cos(self, *args, **kwargs):
        """`ember.cos(self, ...)`."""
        return ember.ops.cos(self, *args, **kwargs)

    def tan(self, *args, **kwargs):
        """`ember.tan(self, ...)`."""
        return ember.ops.tan(self, *args, **kwargs)

    def tanh(self, *args, **kwargs):
        """`ember.tanh(self, ...)`."""
        return ember.ops.tanh(self, *args, **kwargs)

    def sigmoid(self, *args, **kwargs):
        """`ember.sigmoid(self, ...)`."""
        return ember.ops.sigmoid(self, *args, **kwargs)

    def relu(self, *args, **kwargs):
        """`ember.relu(self, ...)`."""
        return ember.ops.relu(self, *args, **kwargs)

    def abs(self, *args, **kwargs):
        """`ember.abs(self, ...)`."""
        return ember.ops.abs(self, *args, **kwargs)

    def sign(self, *args, **kwargs):
        """`ember.sign(self, ...)`."""
        return ember.ops.sign(self, *args, **kwargs)

    def neg(self, *args, **kwargs):
        """`ember.neg(self, ...)`."""
        return ember.ops.neg(self, *args, **kwargs)

    def negative(self, *args, **kwargs):
        """`ember.negative(self, ...)`."""
        return ember.ops.negative(self, *args, **kwargs)

    def reciprocal(self, *args, **kwargs):
        """`ember.reciprocal(self, ...)`."""
        return ember.ops.reciprocal(self, *args, **kwargs)

    def floor(self, *args, **kwargs):
        """`ember.floor(self, ...)`."""
        return ember.ops.floor(self, *args, **kwargs)

    def ceil(self, *args, **kwargs):
        """`ember.ceil(self, ...)`."""
        return ember.ops.ceil(self, *args, **kwargs)

    def trunc(self, *args, **kwargs):
        """`ember.trunc(self, ...)`."""
        return ember.ops.trunc(self, *args, **kwargs)

    def round(self, *args, **kwargs):
        """`ember.round(self, ...)`."""
        return ember.ops.round(self, *args, **kwargs)

    def frac(self, *args, **kwargs):
        """`ember.frac(self, ...)`."""
        return ember.ops.frac(self, *args, **kwargs)

    def erf(self, *args, **kwargs):
        """`ember.erf(self, ...)`."""
        return ember.ops.erf(self, *args, **kwargs)

    def square(self, *args, **kwargs):
        """`ember.square(self, ...)`."""
        return ember.ops.square(self, *args, **kwargs)

    def isnan(self, *args, **kwargs):
        """`ember.isnan(self, ...)`."""
        return ember.ops.isnan(self, *args, **kwargs)

    def isinf(self, *args, **kwargs):
        """`ember.isinf(self, ...)`."""
        return ember.ops.isinf(self, *args, **kwargs)

    def isfinite(self, *args, **kwargs):
        """`ember.isfinite(self, ...)`."""
        return ember.ops.isfinite(self, *args, **kwargs)

    def logical_not(self, *args, **kwargs):
        """`ember.logical_not(self, ...)`."""
        return ember.ops.logical_not(self, *args, **kwargs)

    def logical_and(self, *args, **kwargs):
        """`ember.logical_and(self, ...)`."""
        return ember.ops.logical_and(self, *args, **kwargs)

    def logical_or(self, *args, **kwargs):
        """`ember.logical_or(self, ...)`."""
        return ember.ops.logical_or(self, *args, **kwargs)

    def logical_xor(self, *args, **kwargs):
        """`ember.logical_xor(self, ...)`."""
        return ember.ops.logical_xor(self, *args, **kwargs)

    def bitwise_not(self, *args, **kwargs):
        """`ember.bitwise_not(self, ...)`."""
        return ember.ops.bitwise_not(self, *args, **kwargs)

    def bitwise_and(self, *args, **kwargs):
        """`ember.bitwise_and(self, ...)`."""
        return ember.ops.bitwise_and(self, *args, **kwargs)

    def bitwise_or(self, *args, **kwargs):
        """`ember.bitwise_or(self, ...)`."""
        return ember.ops.bitwise_or(self, *args, **kwargs)

    def bitwise_xor(self, *args, **kwargs):
        """`ember.bitwise_xor(self, ...)`."""
        return ember.ops.bitwise_xor(self, *args, **kwargs)

    def maximum(self, *args, **kwargs):
        """`ember.maximum(self, ...)`."""
        return ember.ops.maximum(self, *args, **kwargs)

    def minimum(self, *args, **kwargs):
        """`ember.minimum(self, ...)`."""
        return ember.ops.minimum(self, *args, **kwargs)

    def pow(self, *args, **kwargs):
        """`ember.pow(self, ...)`."""
        return ember.ops.pow(self, *args, **kwargs)

    def remainder(self, *args, **kwargs):
        """`ember.remainder(self, ...)`."""
        return ember.ops.remainder(self, *args, **kwargs)

    def fmod(self, *args, **kwargs):
        """`ember.fmod(self, ...)`."""
        return ember.ops.fmod(self, *args, **kwargs)

    def floor_divide(self, *args, **kwargs):
        """`ember.floor_divide(self, ...)`."""
        return ember.ops.floor_divide(self, *args, **kwargs)

    def atan2(self, *args, **kwargs):
        """`ember.atan2(self, ...)`."""
        return ember.ops.atan2(self, *args, **kwargs)

    def lerp(self, *args, **kwargs):
        """`ember.lerp(self, ...)`."""
        return ember.ops.lerp(self, *args, **kwargs)

    def addcmul(self, *args, **kwargs):
        """`ember.addcmul(self, ...)`."""
        return ember.ops.addcmul(self, *args, **kwargs)

    def addcdiv(self, *args, **kwargs):
        """`ember.addcdiv(self, ...)`."""
        return ember.ops.addcdiv(self, *args, **kwargs)

    def eq(self, *args, **kwargs):
        """`ember.eq(self, ...)`."""
        return ember.ops.eq(self, *args, **kwargs)

    def ne(self, *args, **kwargs):
        """`ember.ne(self, ...)`."""
        return ember.ops.ne(self, *args, **kwargs)

    def lt(self, *args, **kwargs):
        """`ember.lt(self, ...)`."""
        return ember.ops.lt(self, *args, **kwargs)

    def le(self, *args, **kwargs):
        """`ember.le(self, ...)`."""
        return ember.ops.le(self, *args, **kwargs)

    def gt(self, *args, **kwargs):
        """`ember.gt(self, ...)`."""
        return ember.ops.gt(self, *args, **kwargs)

    def ge(self, *args, **kwargs):
        """`ember.ge(self, ...)`."""
        return ember.ops.ge(self, *args, **kwargs)

    def greater(self, *args, **kwargs):
        """`ember.greater(self, ...)`."""
        return ember.ops.greater(self, *args, **kwargs)

    def less(self, *args, **kwargs):
        """`ember.less(self, ...)`."""
        return ember.ops.less(self, *args, **kwargs)

    def greater_equal(self, *args, **kwargs):
        """`ember.greater_equal(self, ...)`."""
        return ember.ops.greater_equal(self, *args, **kwargs)

    def less_equal(self, *args, **kwargs):
        """`ember.less_equal(self, ...)`."""
        return ember.ops.less_equal(self, *args, **kwargs)

    def not_equal(self, *args, **kwargs):
        """`ember.not_equal(self, ...)`."""
        return ember.ops.not_equal(self, *args, **kwargs)

    def equal(self, *args, **kwargs):
        """`ember.equal(self, ...)`."""
        return ember.ops.equal(self, *args, **kwargs)

    def lgamma(self):
        """`ember.lgamma(self)`."""
        return ember.ops.lgamma(self)

    def digamma(self):
        """`ember.digamma(self)`."""
        return ember.ops.digamma(self)

    def polygamma(self, n: int):
        """`ember.polygamma(n, self)` (PyTorch's method puts n first too)."""
        return ember.ops.polygamma(n, self)

    def erfc(self):
        """`ember.erfc(self)`."""
        return ember.ops.erfc(self)

    def erfinv(self):
        """`ember.erfinv(self)`."""
        return ember.ops.erfinv(self)

    def logit(self, *args, **kwargs):
        """`ember.logit(self, ...)`."""
        return ember.ops.logit(self, *args, **kwargs)

    def xlogy(self, other):
        """`ember.xlogy(self, other)`."""
        return ember.ops.xlogy(self, other)

    def isclose(self, *args, **kwargs):
        """`ember.isclose(self, ...)`."""
        return ember.ops.isclose(self, *args, **kwargs)

    def allclose(self, *args, **kwargs):
        """`ember.allclose(self, ...)`."""
        return ember.ops.allclose(self, *args, **kwargs)

    def clamp(self, *args, **kwargs):
        """`ember.clamp(self, ...)`."""
        return ember.ops.clamp(self, *args, **kwargs)

    def clip(self, *args, **kwargs):
        """`ember.clip(self, ...)`."""
        return ember.ops.clip(self, *args, **kwargs)

    def clamp_min(self, *args, **kwargs):
        """`ember.clamp_min(self, ...)`."""
        return ember.ops.clamp_min(self, *args, **kwargs)

    def clamp_max(self, *args, **kwargs):
        """`ember.clamp_max(self, ...)`."""
        return ember.ops.clamp_max(self, *args, **kwargs)

    def add(self, *args, **kwargs):
        """`ember.add(self, ...)`."""
        return ember.ops.add(self, *args, **kwargs)

    def sub(self, *args, **kwargs):
        """`ember.sub(self, ...)`."""
        return ember.ops.sub(self, *args, **kwargs)

    def subtract(self, *args, **kwargs):
        """`ember.subtract(self, ...)`."""
        return ember.ops.subtract(self, *args, **kwargs)

    def div(self, *args, **kwargs):
        """`ember.div(self, ...)`."""
        return ember.ops.div(self, *args, **kwargs)

    def divide(self, *args, **kwargs):
        """`ember.divide(self, ...)`."""
        return ember.ops.divide(self, *args, **kwargs)

    def true_divide(self, *args, **kwargs):
        """`ember.true_divide(self, ...)`."""
        return ember.ops.true_divide(self, *args, **kwargs)

    def mul(self, *args, **kwargs):
        """`ember.mul(self, ...)`."""
        return ember.ops.mul(self, *args, **kwargs)

    def multiply(self, *args, **kwargs):
        """`ember.multiply(self, ...)`."""
        return ember.ops.multiply(self, *args, **kwargs)

    def where(self, condition, other):
        """`ember.where(condition, self, other)`."""
        return ember.ops.where(condition, self, other)
