"""Statistical and utility reductions: sum, prod, mean, var, std, max, min, cumulative_sum, all, any."""

from __future__ import annotations

import builtins

from ember import creation, dtypes, ops
from ember.array_api._dtypes import _check_dtype
from ember.array_api._helpers import check_array, norm_axes


def _reduce(fn_name, fn, x, axis, keepdims, **kw):
    check_array(fn_name, x)
    axes = norm_axes(fn_name, axis, x.ndim)
    if x.ndim and not axes:  # axis=() reduces nothing (PyTorch's dim=() would reduce everything)
        return fn(ops.unsqueeze(x, 0), dim=0, keepdim=False, **kw)
    if not x.ndim:
        return fn(x, **kw)
    return fn(x, dim=axes, keepdim=keepdims, **kw)


def _acc_dtype(x, dtype):
    """The standard's accumulator dtype: the given one, else ints widen to int64 and floats stay."""
    if dtype is not None:
        return _check_dtype("sum", dtype)
    if x.dtype is dtypes.bool_ or x.dtype.category == dtypes.INT:
        return dtypes.int64
    return x.dtype


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """The sum over axis (ints accumulate in int64 unless dtype says otherwise)."""
    check_array("sum", x)
    acc = _acc_dtype(x, dtype)
    return _reduce("sum", ops.sum, x.to(acc), axis, keepdims, dtype=acc)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """The product over axis."""
    check_array("prod", x)
    x = x.to(_acc_dtype(x, dtype))
    axes = norm_axes("prod", axis, x.ndim)
    if x.ndim and not axes:
        return ops.clone(x)
    out = x
    for a in reversed(axes):  # PyTorch's prod reduces one dim at a time
        out = ops.prod(out, dim=a, keepdim=keepdims, dtype=x.dtype)
    return out if x.ndim else ops.prod(x, dtype=x.dtype)


def mean(x, /, *, axis=None, keepdims=False):
    """The arithmetic mean over axis (floating-point arrays)."""
    return _reduce("mean", ops.mean, x, axis, keepdims)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The largest element over axis (NaN propagates)."""
    return _reduce("max", ops.amax, x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The smallest element over axis (NaN propagates)."""
    return _reduce("min", ops.amin, x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The variance over axis with `correction` degrees of freedom removed."""
    return _reduce("var", ops.var, x, axis, keepdims, correction=correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The standard deviation over axis with `correction` degrees of freedom removed."""
    return _reduce("std", ops.std, x, axis, keepdims, correction=correction)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether every element over axis is true."""
    return _bool_reduce("all", ops.all, x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether some element over axis is true."""
    return _bool_reduce("any", ops.any, x, axis, keepdims)


def _bool_reduce(name, fn, x, axis, keepdims):
    check_array(name, x)
    axes = norm_axes(name, axis, x.ndim)
    if x.ndim and not axes:
        return x.to(dtypes.bool_)
    out = x
    for a in reversed(axes):
        out = fn(out, dim=a, keepdim=keepdims)
    return out if x.ndim else fn(x)


def _cumulative(name: str, scan, start: float, x, axis, dtype, include_initial: bool):
    """A running reduction `scan` (ember.cumsum or cumprod) along axis; include_initial prepends `start`."""
    check_array(name, x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"array_api.{name}: axis is required for a {x.ndim}-d array")
        axis = 0
    x = x.to(_acc_dtype(x, dtype))
    axis = norm_axes(name, axis, x.ndim)[0]
    out = scan(x, axis, dtype=x.dtype) if x.shape[axis] else ops.clone(x)  # dtype=: PyTorch widens ints
    if include_initial:
        shape = list(x.shape)
        shape[axis] = 1
        out = ops.cat([creation.full(shape, start, dtype=x.dtype, device=x.device), out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along axis (which may be omitted for 1-d arrays); include_initial prepends a zero."""
    return _cumulative("cumulative_sum", ops.cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along axis (which may be omitted for 1-d arrays); include_initial prepends a one."""
    return _cumulative("cumulative_prod", ops.cumprod, 1, x, axis, dtype, include_initial)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """How many elements over axis are not zero (in the default integer dtype)."""
    check_array("count_nonzero", x)
    return sum(x != 0, axis=axis, keepdims=keepdims)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The n-th forward difference along axis, after joining prepend and append to x along it."""
    check_array("diff", x)
    if x.ndim == 0:
        raise ValueError("array_api.diff: not defined for 0-d arrays")
    axis = norm_axes("diff", axis, x.ndim)[0]
    if n < 0:
        raise ValueError(f"array_api.diff: n must be non-negative, got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        from ember.array_api._manipulation import concat

        x = concat(parts, axis=axis)
    for _ in range(n):
        m = x.shape[axis]
        hi = ops.narrow(x, axis, 1, builtins.max(m - 1, 0)) if m else x
        lo = ops.narrow(x, axis, 0, builtins.max(m - 1, 0)) if m else x
        x = ops.logical_xor(hi, lo) if x.dtype is dtypes.bool_ else hi - lo
    return x
