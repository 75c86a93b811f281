"""A fast kernel for "reduce rows into positions": out[rows[i]] op= values[i] along one axis.

NumPy's ufunc.at does this element by element and is an order of magnitude slower than a sort and
one ufunc.reduceat per call when thousands of rows (graph edges, say) land in hundreds of
positions; index_add, scatter_add with a broadcast index, and scatter_reduce use this instead.
A sum along the first axis of float32/float64 data (an embedding's gradient) is a compiled loop that adds
each row in place, with the `jit` extra: no sort and no gathered copy of the values.
"""

from __future__ import annotations

import numpy as np

from ember.kernels.numba_loader import kernel_for

_SOURCE = '''
def add_rows(out, rows, values):
    n = out.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i]
        if r < 0:
            r += n
        for j in range(out.shape[1]):
            out[r, j] += values[i, j]
'''


def reduce_into_rows(ufunc, out: np.ndarray, rows: np.ndarray, values: np.ndarray, axis: int = 0) -> None:
    """out[..., rows[i], ...] = ufunc(out[..., rows[i], ...], values[..., i, ...]) along `axis`, repeats included."""
    if rows.size == 0:
        return
    if ufunc is np.add and axis == 0 and out.flags.c_contiguous and values.dtype == out.dtype:
        fn = kernel_for(_SOURCE, "add_rows", np, out.dtype, values.size)
        if fn is not None:
            fn(out.reshape(out.shape[0], -1), rows, np.ascontiguousarray(values).reshape(rows.shape[0], -1))
            return
    n = out.shape[axis]
    rows = np.where(rows < 0, rows + n, rows)  # -1 and n-1 are one position
    dst = np.moveaxis(out, axis, 0)  # a view: writes land in out
    src = np.moveaxis(values, axis, 0)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    part = ufunc.reduceat(src[order], starts, axis=0)
    targets = ordered[starts]
    dst[targets] = ufunc(dst[targets], part.astype(dst.dtype, copy=False))


def single_axis_rows(index: np.ndarray, shape: tuple, axis: int):
    """The 1-D rows behind an along-axis index that only varies along `axis` (a broadcast of one index vector
    to the whole shape, as index_reduce and graph layers build), else None."""
    if index.ndim != len(shape) or index.ndim == 0:
        return None
    for k in range(index.ndim):
        if k != axis and (index.strides[k] != 0 or index.shape[k] != shape[k]):
            return None
    return index[tuple(slice(None) if k == axis else 0 for k in range(index.ndim))]
