"""Shared pieces of the wrappers: argument checks, the standard's promotion of two operands, axes."""

from __future__ import annotations

from ember.array_api._dtypes import promote
from ember.tensor import Tensor

_SCALARS = (int, float, bool)


def check_array(fn: str, x):
    """x, or a TypeError naming fn when it is not an array."""
    if not isinstance(x, Tensor):
        raise TypeError(f"array_api.{fn}: expected an array, got {type(x).__name__}")
    return x


def promote_pair(fn: str, x1, x2):
    """The two operands with the standard's promotion applied (PyTorch's rules let a 0-d array of a
    wider dtype lose to a 1-d one, so both arrays are cast to the one result dtype first). A Python
    scalar stays as it is: Ember's rule for an array with a scalar of its kind is the standard's."""
    if not isinstance(x1, Tensor):
        if not isinstance(x2, Tensor):
            raise TypeError(f"array_api.{fn}: at least one argument must be an array")
        check_scalar(fn, x1)
    elif not isinstance(x2, Tensor):
        check_scalar(fn, x2)
    elif x1.dtype is not x2.dtype:
        dtype = promote(fn, x1.dtype, x2.dtype)
        x1, x2 = x1.to(dtype), x2.to(dtype)
    return x1, x2


def check_scalar(fn: str, s):
    """s when it is a Python scalar, else a TypeError naming fn."""
    if isinstance(s, complex):
        raise TypeError(f"array_api.{fn}: Ember has no complex dtypes")
    if not isinstance(s, _SCALARS):
        raise TypeError(f"array_api.{fn}: expected an array or a Python scalar, got {type(s).__name__}")
    return s


def norm_axes(fn: str, axis, ndim: int):
    """None (all axes), an int or a tuple of ints -> a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(f"array_api.{fn}: axis {a} is out of range for an array of {ndim} dimension(s)")
        out.append(a % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"array_api.{fn}: axis {axis} names an axis more than once")
    return tuple(sorted(out)) if ndim else ()
