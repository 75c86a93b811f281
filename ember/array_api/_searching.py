"""Searching, sorting, set and indexing functions: argmax/argmin, nonzero, searchsorted, where, sort,
argsort, unique_*, take."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ember import creation, dtypes, ops
from ember.array_api._dtypes import result_type
from ember.array_api._helpers import check_array, norm_axes, promote_pair
from ember.tensor import Tensor


def argmax(x, /, *, axis=None, keepdims=False):
    """The index of the first largest element (over the flattened array when axis is None)."""
    return _arg("argmax", ops.argmax, x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    """The index of the first smallest element."""
    return _arg("argmin", ops.argmin, x, axis, keepdims)


def _arg(name, fn, x, axis, keepdims):
    check_array(name, x)
    if axis is None:
        out = fn(ops.reshape(x, (-1,)), dim=0)
        return ops.reshape(out, (1,) * x.ndim) if keepdims else out
    return fn(x, dim=norm_axes(name, axis, x.ndim)[0] if x.ndim else None, keepdim=keepdims)


def nonzero(x, /):
    """A tuple of index arrays, one per axis, of the non-zero elements (0-d arrays are an error)."""
    check_array("nonzero", x)
    if x.ndim == 0:
        raise ValueError("array_api.nonzero: not defined for 0-d arrays")
    return tuple(ops.nonzero(x, as_tuple=True))


def where(condition, x1, x2, /):
    """x1 where condition holds, else x2 (broadcast, promoted per the standard)."""
    check_array("where", condition)
    x1, x2 = promote_pair("where", x1, x2)
    return ops.where(condition, x1, x2)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices into sorted 1-d x1 where x2's elements would be inserted to keep it sorted."""
    check_array("searchsorted", x1)
    if side not in ("left", "right"):
        raise ValueError(f"array_api.searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        x1 = ops.take_along_dim(x1, sorter, 0)
    dtype = result_type(x1, x2)
    a = x1.to(dtype).numpy(force=True)
    v = x2.to(dtype).numpy(force=True) if isinstance(x2, Tensor) else np.asarray(x2, dtype.np)
    return creation.tensor(np.searchsorted(a, v, side=side), dtype=dtypes.int64, device=x1.device)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """x sorted along axis (stable; descending keeps equal elements in their order)."""
    check_array("sort", x)
    if x.ndim == 0:
        return ops.clone(x)
    return ops.take_along_dim(x, argsort(x, axis=axis, descending=descending, stable=stable), axis)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The indices that sort x along axis."""
    check_array("argsort", x)
    if x.ndim == 0:
        return creation.zeros((), dtype=dtypes.int64, device=x.device)
    if not descending:
        return ops.argsort(x, axis, stable=True)
    # A stable descending order: sort the reversed axis ascending, then reverse and map indices back.
    axis = norm_axes("argsort", axis, x.ndim)[0]
    n = x.shape[axis]
    idx = ops.argsort(ops.flip(x, (axis,)), axis, stable=True)
    return (n - 1) - ops.flip(idx, (axis,))


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique(name, x):
    """NumPy's unique with NaNs kept distinct, as the standard asks (on the host: data-dependent shapes)."""
    check_array(name, x)
    a = x.numpy(force=True).reshape(-1)
    values, index, inverse, counts = np.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                               equal_nan=False)
    return values, index, inverse.reshape(x.shape), counts


def _t(a, x, dtype=None):
    return creation.tensor(np.array(a), dtype=dtype or x.dtype, device=x.device)


def unique_all(x, /):
    """The unique values, the first index of each, the inverse indices and the counts."""
    v, i, inv, c = _unique("unique_all", x)
    return UniqueAllResult(_t(v, x), _t(i, x, dtypes.int64), _t(inv, x, dtypes.int64), _t(c, x, dtypes.int64))


def unique_counts(x, /):
    """The unique values and how often each occurs."""
    v, _, _, c = _unique("unique_counts", x)
    return UniqueCountsResult(_t(v, x), _t(c, x, dtypes.int64))


def unique_inverse(x, /):
    """The unique values and, for each element of x, the index of its value."""
    v, _, inv, _ = _unique("unique_inverse", x)
    return UniqueInverseResult(_t(v, x), _t(inv, x, dtypes.int64))


def unique_values(x, /):
    """The unique values of x (sorted; each NaN is its own value)."""
    return _t(_unique("unique_values", x)[0], x)


def take(x, indices, /, *, axis=None):
    """Elements of x at indices along axis (axis may be omitted for 1-d x)."""
    check_array("take", x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"array_api.take: axis is required for a {x.ndim}-d array")
        axis = 0
    axis = norm_axes("take", axis, x.ndim)[0]
    n = x.shape[axis]
    indices = ops.where(indices < 0, indices + n, indices) if indices.numel() else indices
    return ops.index_select(x, axis, indices.to(dtypes.int64))


def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of x picked along axis by indices of the same number of dimensions."""
    check_array("take_along_axis", x)
    n = x.shape[axis] if x.ndim else 1
    indices = ops.where(indices < 0, indices + n, indices) if indices.numel() else indices
    return ops.take_along_dim(x, indices.to(dtypes.int64), axis)


def isin(x1, x2, /, *, invert=False):
    """Whether each element of x1 occurs in x2 (elementwise; NaN is never found)."""
    x1, x2 = promote_pair("isin", x1, x2)
    if not isinstance(x1, Tensor):
        x1 = creation.tensor(x1, dtype=x2.dtype, device=x2.device)
    if not isinstance(x2, Tensor):
        x2 = creation.tensor([x2], dtype=x1.dtype, device=x1.device)
    flat = ops.reshape(x2, (-1,))
    found = ops.any(ops.unsqueeze(x1, -1) == flat, dim=-1) if flat.shape[0] else ops.zeros_like(x1, dtype=dtypes.bool_)
    return ops.logical_not(found) if invert else found
