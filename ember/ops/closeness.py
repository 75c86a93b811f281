"""`isclose` and `allclose`: elementwise |input - other| <= atol + rtol * |other|, with PyTorch's rules."""

from __future__ import annotations

import math

from ember import dtypes as dt
from ember.ops.elementwise import abs as _abs
from ember.ops.elementwise import eq, isfinite, isnan, le, logical_and, logical_or


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Whether each element of input is close to other's: |input - other| <= atol + rtol * |other|.

    Both tensors need the same dtype (as in PyTorch); equal values (infinities too) are close, NaN is
    close to NaN only with `equal_nan`. Integer tensors are compared in the default float dtype.
    """
    from ember.tensor import Tensor

    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"isclose: expected two tensors, got {type(input).__name__} and {type(other).__name__}")
    if input.dtype is not other.dtype:
        raise TypeError(f"isclose: input is {input.dtype.name} but other is {other.dtype.name}; "
                        "convert one so both have the same dtype")
    if not (rtol >= 0 and atol >= 0) or math.isnan(rtol) or math.isnan(atol):
        raise ValueError(f"isclose: rtol and atol must be non-negative numbers, got rtol={rtol} and atol={atol}")
    close = eq(input, other)
    if input.dtype is dt.bool_:
        return close
    if equal_nan and input.is_floating_point():
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    if not input.is_floating_point():
        input, other = input.to(dt.get_default_dtype()), other.to(dt.get_default_dtype())
    actual = _abs(input - other)
    allowed = _abs(other) * rtol + atol
    return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (one Python bool; the shapes must broadcast)."""
    from ember.ops.reduction import all as _all

    return bool(_all(isclose(input, other, rtol, atol, equal_nan)))
