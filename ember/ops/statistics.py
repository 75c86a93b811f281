"""Order statistics and NaN-ignoring reductions composed of other ops (gradients through sort and gather):
median, nanmedian, quantile, nanquantile, nansum, nanmean, aminmax, cov, corrcoef, with PyTorch's rules for NaN
and ties."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ember import creation
from ember import dtypes as dt
from ember.backends.meta import is_symbolic
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.ops._rules import SINGLE_DOUBLE_NP, norm_dim, require_float
from ember.ops.elementwise import (
    ceil,
    clamp_min,
    floor,
    floor_divide,
    isnan,
    logical_not,
    round,
    where,
)
from ember.ops.indexing import gather
from ember.ops.pointwise import lerp
from ember.ops.reduction import MaxMinResult, amax, amin, any, sum
from ember.ops.shape import movedim, reshape, squeeze, unsqueeze
from ember.ops.sorting import sort

aminmax_result = namedtuple("aminmax", ["min", "max"])


def _rows(op: str, input, dim):
    """input with the reduced dim last (flattened when dim is None), and that dim's index (None for all)."""
    if dim is None:
        return reshape(input, (-1,)), None
    d = norm_dim(op, dim, max(input.ndim, 1))
    x = input if input.ndim else reshape(input, (1,))
    return movedim(x, d, -1), d


def _restore(out, input, d, keepdim: bool):
    """A (..., 1) result of _rows' layout back in input's: the kept dim at d, or squeezed away."""
    if not keepdim:
        return squeeze(out, -1)
    if d is None:
        return reshape(out, (1,) * input.ndim)
    return movedim(out, -1, d) if input.ndim else reshape(out, ())


def _median(op: str, input, dim, keepdim: bool, skip_nan: bool):
    x, d = _rows(op, input, dim)
    n = x.shape[-1]
    if n == 0:
        raise ShapeError(f"{op}: cannot take the median of an empty dimension (input {fmt_shape(input.shape)})")
    values, indices = sort(x, -1, stable=True)  # NaN last, the first NaN first among them
    if input.dtype.is_floating_point:
        valid = sum(logical_not(isnan(x)), -1, True)  # also the sorted position of the first NaN
        if skip_nan:  # the lower median of the numbers; a row of NaN: its first NaN (PyTorch's pick is arbitrary)
            pos = clamp_min(floor_divide(valid - 1, 2), 0)
        else:  # any NaN: the first one, as PyTorch's median propagates it
            pos = where(valid < n, valid, (n - 1) // 2)
    else:
        pos = creation.full(tuple(x.shape[:-1]) + (1,), (n - 1) // 2, device=x.device)
    return gather(values, -1, pos), gather(indices, -1, pos), d


def _median_result(op: str, input, dim, keepdim: bool, skip_nan: bool):
    v, i, d = _median(op, input, dim, keepdim, skip_nan)
    if dim is None:
        return reshape(v, ())
    return MaxMinResult(_restore(v, input, d, keepdim), _restore(i, input, d, keepdim))


def median(input, dim=None, keepdim: bool = False):
    """The lower median (NaN if any element is); with `dim`, (values, indices) along it."""
    return _median_result("median", input, dim, keepdim, skip_nan=False)


def nanmedian(input, dim=None, keepdim: bool = False):
    """The lower median of the elements that are not NaN (NaN where all are); with `dim`, (values, indices)."""
    return _median_result("nanmedian", input, dim, keepdim, skip_nan=True)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op: str, input, q, dim, keepdim: bool, interpolation: str, skip_nan: bool):
    if input.dtype.np not in SINGLE_DOUBLE_NP:
        raise DtypeError(f"{op}: input must be float32 or float64, got {input.dtype.name}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, got {interpolation!r}")
    scalar_q = not hasattr(q, "shape") or q.ndim == 0
    if hasattr(q, "shape"):
        if q.dtype is not input.dtype:
            raise DtypeError(f"{op}: q must have the input's dtype ({input.dtype.name}), got {q.dtype.name}")
        if q.ndim > 1:
            raise ShapeError(f"{op}: q must be a scalar or 1-D, got shape {fmt_shape(q.shape)}")
        qs = reshape(q, (-1,))
        # checked where q has values (not on meta, nor while the jit traces q as an input)
        values = None if q.device.type == "meta" or is_symbolic(q) else q.detach().cpu().numpy()
    else:
        qs = creation.tensor([float(q)], dtype=input.dtype, device=input.device)
        values = np.asarray([float(q)])
    if values is not None and ((values < 0) | (values > 1)).any():
        raise ValueError(f"{op}: q values must be in the range [0, 1]")
    x, d = _rows(op, input, dim)
    n = x.shape[-1]
    if n == 0:
        raise ShapeError(f"{op}: input {fmt_shape(input.shape)} has no elements to take quantiles of")
    ordered = sort(x, -1)[0]  # NaN last
    if skip_nan:  # ranks among each row's numbers; a row of NaN ranks below 0 and takes position 0, a NaN
        ranks = clamp_min(qs * (sum(logical_not(isnan(x)), -1, True) - 1), 0)
    else:  # a row holding NaN takes its last position, a NaN
        ranks = where(any(isnan(x), -1, True), float(n - 1), qs * (n - 1))
    if interpolation == "nearest":
        picked = gather(ordered, -1, round(ranks).long())
    else:
        below = gather(ordered, -1, floor(ranks).long())
        above = gather(ordered, -1, ceil(ranks).long())
        if interpolation == "lower":
            picked = below
        elif interpolation == "higher":
            picked = above
        else:
            picked = lerp(below, above, 0.5 if interpolation == "midpoint" else ranks - floor(ranks))
    out = movedim(picked, -1, 0)  # (quantiles, the other dims in input's order)
    if keepdim:
        out = reshape(out, (out.shape[0],) + (1,) * input.ndim) if d is None else unsqueeze(out, 1 + d)
    return squeeze(out, 0) if scalar_q else out


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The q-th quantiles (q a number or 1-D tensor in [0, 1]) over `dim` or all elements; NaN where any is."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, skip_nan=False)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """quantile ignoring NaN (NaN where every element is)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, skip_nan=True)


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Sum treating NaN as zero."""
    x = where(isnan(input), 0, input) if input.dtype.is_floating_point else input
    return sum(x, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Mean of the elements that are not NaN (NaN where all are)."""
    require_float("nanmean", input.dtype.np)
    count = sum(logical_not(isnan(input)), dim, keepdim)
    total = nansum(input, dim, keepdim, dtype=dtype)
    return total / count.to(total.dtype)


def aminmax(input, *, dim=None, keepdim: bool = False):
    """(min, max) over `dim` or all elements."""
    return aminmax_result(amin(input, dim, keepdim), amax(input, dim, keepdim))


def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in its columns; a 1-D input is one
    variable), with integer frequency weights and float observation weights as in PyTorch and NumPy."""
    from ember.ops.linalg import matmul

    if input.ndim > 2:
        raise ShapeError(f"cov: expected a 1-D or 2-D input (variables, observations), got {fmt_shape(input.shape)}")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:  # integers give the default float dtype, as in PyTorch
        x = x.to(dt.get_default_dtype())
    weights = None
    for given in (fweights, aweights):
        if given is not None:
            if given.ndim != 1 or given.shape[0] != x.shape[1]:
                raise ShapeError(f"cov: weights must be 1-D with one value per observation ({x.shape[1]}), got "
                                 f"{fmt_shape(given.shape)}")
            weights = given if weights is None else weights * given
    if weights is None:
        total = x.shape[1]
        mean = sum(x, 1, True) / total
        norm = total - correction
        centred = x - mean
        out = matmul(centred, centred.T) / norm
    else:
        weights = weights.to(x.dtype)
        total = sum(weights)
        mean = sum(x * weights, 1, True) / total
        norm = total - correction if aweights is None else total - correction * sum(weights * aweights) / total
        centred = x - mean
        out = matmul(centred * weights, centred.T) / norm
    return reshape(out, ()) if input.ndim < 2 else out


def corrcoef(input):
    """Pearson correlation coefficients of the variables in input's rows, clipped to [-1, 1]."""
    from ember.ops.elementwise import clamp, sqrt
    from ember.ops.shape import diagonal

    c = cov(input)
    if input.ndim < 2:
        return c / c
    spread = sqrt(diagonal(c))
    return clamp(c / unsqueeze(spread, 1) / unsqueeze(spread, 0), -1.0, 1.0)
