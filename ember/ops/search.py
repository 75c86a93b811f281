"""Functions whose result's shape or positions depend on the values (no gradient, as in PyTorch, but mode's
values): unique, unique_consecutive, isin, searchsorted, bucketize, bincount, histc, histogram, mode. They read the
values on the host and return a tensor on the input's device; on the meta device they raise DataDependentError."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ember import creation
from ember import dtypes as dt
from ember.errors import DataDependentError, DtypeError, ShapeError, fmt_shape
from ember.ops._rules import norm_dim

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])


def _host(op: str, t) -> np.ndarray:
    """t's values as a NumPy array (a Python number as a 0-D one)."""
    if not hasattr(t, "shape"):
        return np.asarray(t)
    if t.device.type == "meta":
        raise DataDependentError(f"{op}: the result's shape depends on the values, which a meta tensor does not have")
    return np.asarray(t.detach().cpu().numpy())


def _like(array: np.ndarray, t):
    return creation.tensor(array, device=getattr(t, "device", None))


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None):
    """The distinct elements (or slices along `dim`) in ascending order, each NaN distinct as in PyTorch; with
    return_inverse, where each element went (input's shape), with return_counts, how often each occurs."""
    values = _host("unique", input)
    axis = None if dim is None else norm_dim("unique", dim, values.ndim)
    out, inverse, counts = np.unique(values, return_inverse=True, return_counts=True, axis=axis, equal_nan=False)
    result = [_like(out, input)]
    if return_inverse:
        result.append(_like(inverse.reshape(values.shape if axis is None else -1).astype(np.int64), input))
    if return_counts:
        result.append(_like(counts.astype(np.int64), input))
    return result[0] if len(result) == 1 else tuple(result)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Whether each of `elements` is among `test_elements` (either may be a number)."""
    e, t = _host("isin", elements), _host("isin", test_elements)
    like = elements if hasattr(elements, "shape") else test_elements
    return _like(np.isin(e, t, assume_unique=assume_unique, invert=invert), like)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False, side: str | None = None,
                 sorter=None):
    """Where each value would be inserted into the sorted sequence (along its last dim, row by row for N-D) to
    keep it sorted: before equal entries, or after them with right=True / side='right'."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    seq, values = _host("searchsorted", sorted_sequence), _host("searchsorted", input)
    order = None if sorter is None else _host("searchsorted", sorter)
    how = "right" if right else "left"
    if seq.ndim <= 1:
        found = np.searchsorted(seq.reshape(-1), values, side=how, sorter=order)
    else:
        if values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]:
            raise ShapeError(f"searchsorted: the sorted sequence {fmt_shape(seq.shape)} and the values "
                             f"{fmt_shape(values.shape)} must agree in every dimension but the last")
        rows_s, rows_v = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        rows_o = None if order is None else order.reshape(-1, order.shape[-1])
        found = np.stack([np.searchsorted(s, v, side=how, sorter=None if rows_o is None else rows_o[i])
                          for i, (s, v) in enumerate(zip(rows_s, rows_v))]).reshape(values.shape)
    like = input if hasattr(input, "shape") else sorted_sequence
    return _like(np.asarray(found).astype(np.int32 if out_int32 else np.int64), like)


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The bucket of each value among 1-D ascending boundaries: i with boundaries[i-1] < x <= boundaries[i]
    (right=True: boundaries[i-1] <= x < boundaries[i])."""
    if getattr(boundaries, "ndim", 1) != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {fmt_shape(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength: int = 0):
    """How often each non-negative integer occurs in a 1-D tensor (or the sum of its weights): int64 counts,
    float32 sums for float32 weights and float64 for others, as PyTorch gives."""
    if input.dtype.is_floating_point or input.dtype is dt.bool_:
        raise DtypeError(f"bincount: input must be an integer tensor, got {input.dtype.name}")
    if input.ndim != 1:
        raise ShapeError(f"bincount: input must be 1-D, got shape {fmt_shape(input.shape)}")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise ShapeError(f"bincount: weights {fmt_shape(weights.shape)} must have the input's shape "
                         f"{fmt_shape(input.shape)}")
    values = _host("bincount", input)
    if values.size and values.min() < 0:
        raise ValueError(f"bincount: input must be non-negative, got {int(values.min())}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is None:
        return _like(np.bincount(values, minlength=minlength).astype(np.int64), input)
    w = _host("bincount", weights)
    dtype = np.float32 if weights.dtype is dt.float32 else np.float64
    return _like(np.bincount(values, w.astype(np.float64), minlength=minlength).astype(dtype), input)


def histc(input, bins: int = 100, min: float = 0, max: float = 0):  # noqa: A002  (PyTorch's names)
    """A histogram of `bins` equal bins over [min, max] (the data's range where min == max); elements outside it
    are not counted, one equal to max falls in the last bin."""
    if not input.dtype.is_floating_point:
        raise DtypeError(f"histc: input must be floating point, got {input.dtype.name}")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {bins}")
    values = _host("histc", input).reshape(-1)
    lo, hi = float(min), float(max)
    if lo > hi:
        raise ValueError(f"histc: max ({hi}) must be at least min ({lo})")
    if lo == hi and values.size:
        lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"histc: range of [{lo}, {hi}] is not finite")
    inside = values[(values >= lo) & (values <= hi)].astype(np.float64)
    position = ((inside - lo) * bins / (hi - lo)).astype(np.int64)
    counts = np.bincount(np.minimum(position, bins - 1), minlength=bins)
    return _like(counts.astype(input.dtype.np), input)


def mode(input, dim: int = -1, keepdim: bool = False):
    """(values, indices) of the most frequent value along `dim`: the smallest among equally frequent ones, at its
    last position (each NaN counts once, as in PyTorch); the values carry the gradient to those positions."""
    from ember.ops.indexing import gather
    from ember.ops.reduction import MaxMinResult

    d = norm_dim("mode", dim, max(input.ndim, 1))
    values = _host("mode", input)
    rows = np.moveaxis(values.reshape(values.shape or (1,)), d, -1)
    flat = rows.reshape(-1, rows.shape[-1]) if rows.size or rows.shape[-1] else rows.reshape(0, 0)
    if flat.shape[-1] == 0:
        raise ShapeError(f"mode: cannot take the mode of an empty dimension (input {fmt_shape(input.shape)})")
    picks = np.empty(flat.shape[0], np.int64)
    for r, row in enumerate(flat):
        order = np.argsort(row, kind="stable")
        ordered = row[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # NaN != NaN: each its own run
        counts = np.diff(np.r_[starts, ordered.size])
        best = int(np.argmax(counts))  # the first of the longest runs: the smallest value
        picks[r] = order[starts[best] + counts[best] - 1]  # a stable order ends each run at its last position
    index = picks.reshape(rows.shape[:-1] + (1,))
    index_t = creation.tensor(np.moveaxis(index, -1, d) if input.ndim else index.reshape(()), device=input.device)
    picked = gather(input, d, index_t) if input.ndim else input.clone()
    if not keepdim and input.ndim:
        picked, index_t = picked.squeeze(d), index_t.squeeze(d)
    return MaxMinResult(picked, index_t)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None):
    """Each run of equal consecutive elements (or slices along `dim`) kept once; with return_inverse, the run
    each element is in, with return_counts, each run's length."""
    values = _host("unique_consecutive", input)
    if dim is None:
        moved = values.reshape(-1, 1)
    else:
        d = norm_dim("unique_consecutive", dim, values.ndim)
        moved = np.moveaxis(values, d, 0).reshape(values.shape[d], -1)
    if moved.shape[0] == 0:
        starts = np.zeros(0, np.int64)
    else:
        starts = np.flatnonzero(np.r_[True, (moved[1:] != moved[:-1]).any(axis=1)])
    kept = moved[starts]
    if dim is None:
        out = kept.reshape(-1)
    else:
        rest = np.moveaxis(values, d, 0).shape[1:]
        out = np.moveaxis(kept.reshape((len(starts),) + rest), 0, d)
    result = [_like(np.ascontiguousarray(out), input)]
    if return_inverse:
        inverse = np.cumsum(np.isin(np.arange(moved.shape[0]), starts)) - 1
        result.append(_like(inverse.reshape(values.shape if dim is None else -1).astype(np.int64), input))
    if return_counts:
        result.append(_like(np.diff(np.r_[starts, moved.shape[0]]).astype(np.int64), input))
    return result[0] if len(result) == 1 else tuple(result)


def histogram(input, bins=100, *, range=None, weight=None, density: bool = False):  # noqa: A002
    """(hist, bin_edges): counts (or summed weights) in `bins` equal bins over `range` (the data's by default)
    or between given edges, the last bin closed on the right, as NumPy's histogram; density normalises them."""
    if not input.dtype.is_floating_point:
        raise DtypeError(f"histogram: input must be floating point, got {input.dtype.name}")
    values = _host("histogram", input).reshape(-1)
    w = None if weight is None else _host("histogram", weight).reshape(-1)
    if hasattr(bins, "shape"):
        edges = _host("histogram", bins).astype(values.dtype)
    else:
        lo, hi = (float(values.min()), float(values.max())) if range is None and values.size else \
            (tuple(float(v) for v in range) if range is not None else (0.0, 1.0))
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5  # NumPy's widening of an empty range
        edges = creation.linspace(lo, hi, int(bins) + 1, dtype=input.dtype).numpy()  # (ember.linspace's values)
    hist, _ = np.histogram(values, bins=edges, weights=w, density=density)
    return histogram_result(_like(hist.astype(values.dtype), input), _like(edges, input))
