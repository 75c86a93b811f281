"""Layer norm's compiled rows (Numba): the forward's (y, mean, rstd) and the gradient's (gx, gw, gb) over rows of the
normalised size, each row's passes made while it is in cache.

The forward sums each row in vector lanes in the data's dtype (as PyTorch's kernel does) and writes it while it is
in cache, where NumPy makes six passes with temporaries. The gradient (layer_norm_backward, ops/layer_norm_backward.py)
reads x and gy once per row and a second time over the same row; it sums rows in the data's dtype and the weight's
and bias's columns in float64. Both split their rows over the threads: as compiled chunks on the GIL-free workers
from native_split_min values, as Python chunks elsewhere from split_min.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import parallel
from ember.kernels.numba_loader import MIN_ELEMENTS, contiguous, kernel_for
from ember.kernels.selection import Table, compiled_or_numpy, note

_SOURCE = '''
import numpy as np


def layer_norm_rows(x, w, b, eps, y, mean, rstd, r0, r1):
    # rows [r0, r1); row sums in the data's dtype, reassociated into vector lanes (what PyTorch's kernel does):
    # float64 accumulators halved the vector width and converted every value (46 -> 32 us at (1024, 128))
    N = x.shape[1]
    t = x.dtype.type
    zero = t(0)
    inv_n = t(1.0 / N)
    for i in range(r0, r1):
        row = x[i]
        s = zero
        for j in range(N):
            s += row[j]
        mu = s * inv_n
        q = zero
        for j in range(N):
            d = row[j] - mu
            q += d * d
        r = t(1.0) / np.sqrt(q * inv_n + t(eps))
        mean[i] = mu
        rstd[i] = r
        out = y[i]
        for j in range(N):
            out[j] = (row[j] - mu) * r * w[j] + b[j]


def layer_norm_backward_rows(x, gy, mean, rstd, w, gx, sw, sb, r0, r1):
    # rows [r0, r1): gx, and the weight's and bias's column sums over these rows added into sw and sb (float64).
    # Each row's two sums are in the data's dtype (vector lanes, as the forward's) (87 -> 55 us at (1024, 128));
    # float32 column sums over blocks of rows measured no faster than float64 ones
    N = x.shape[1]
    t = x.dtype.type
    zero = t(0)
    inv_n = t(1.0 / N)
    for i in range(r0, r1):
        mu = mean[i]
        r = rstd[i]
        xr = x[i]
        gr = gy[i]
        a = zero
        b = zero
        for j in range(N):
            gw_ = gr[j] * w[j]
            a += gw_
            b += gw_ * ((xr[j] - mu) * r)
        for j in range(N):
            g = gr[j]
            sw[j] += g * ((xr[j] - mu) * r)
            sb[j] += g
        a *= inv_n
        b *= inv_n
        out = gx[i]
        for j in range(N):
            out[j] = (gr[j] * w[j] - a - (xr[j] - mu) * r * b) * r
'''


LAYER_NORM = Table("layer_norm", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, "
                   "2026-11-27; native_split_min: Intel Xeon (family 6, model 167), 2 cores, 2026-12-02", values={
    "split_min": (1 << 20, "from this many values the rows are split over the threads as Python chunks ((16384, 64): "
                           "forward 385 -> 218 us, gradient 497 -> 300; (1024, 128): the hand-off cost more than it "
                           "gained)"),
    "native_split_min": (1 << 16, "... from this many where the workers run compiled chunks without the GIL (a 3 us "
                                  "hand-off; (1024, 128), in us: forward 43 -> 33, gradient 95 -> 62)"),
})
compiled_or_numpy("layer_norm", "compiled rows", "float32/float64 (weight and bias too), 16384+ values, Numba")
compiled_or_numpy("layer_norm_backward", "compiled rows", "float32/float64, Numba, any size (one call replaces the "
                  "composite rule's dozen ops)")


def _rows(x, ndims: int):
    """(rows, values per row, the normalised dims' shape): x as the (rows, n) matrix the kernels walk."""
    tail = x.shape[x.ndim - ndims:]
    n = int(np.prod(tail))
    return (x.size // n if n else 0), n, tail


def _per_column(p, n: int, dtype, fill):
    """A weight or bias as n contiguous values (`fill` everywhere when it is absent)."""
    return np.full(n, fill, dtype) if p is None else contiguous(p, n)


def backward(xp, x, w, mean, rstd, gy, ndims):
    """The compiled kernel's (gx, gw, gb) over rows of the normalised size, or None to use NumPy."""
    if x.dtype not in (np.float32, np.float64) or gy.dtype != x.dtype or mean.dtype != x.dtype \
            or (w is not None and w.dtype != x.dtype):
        return None
    # every size: one call replaces the dozen ops of the composite rule
    fn = kernel_for(_SOURCE, "layer_norm_backward_rows", xp, x.dtype, max(x.size, MIN_ELEMENTS), fastmath={"reassoc"})
    if fn is None:
        return None
    note("layer_norm_backward", "compiled rows")
    rows, n, tail = _rows(x, ndims)
    gx = np.empty(x.shape, x.dtype)
    args = (contiguous(x, (rows, n)), contiguous(gy, (rows, n)), contiguous(mean, rows), contiguous(rstd, rows),
            _per_column(w, n, x.dtype, 1), gx.reshape(rows, n))

    parts = _chunks(x.size, rows)
    # each chunk's column sums of the weight's and bias's gradients, in float64, added after; a chunk's row is
    # padded by 16 values, so no two threads write one cache line (shared, a split ran slower than one thread)
    sw, sb = np.zeros((len(parts), n + 16)), np.zeros((len(parts), n + 16))
    if len(parts) == 1:
        fn(*args, sw[0], sb[0], 0, rows)
    else:
        parallel.run_kernel(fn, parts, args, (sw, sb))
    return gx, sw[:, :n].sum(0).astype(x.dtype).reshape(tail), sb[:, :n].sum(0).astype(x.dtype).reshape(tail)


def _chunks(size: int, rows: int) -> list:
    """The row chunks of a pass over `size` values: split from LAYER_NORM's thresholds, else one."""
    least = LAYER_NORM["native_split_min" if parallel.native() else "split_min"]
    return parallel.chunks(rows) if size >= least else [(0, rows)]


def forward(xp, x, w, b, ndims: int, eps: float):
    """(y, mean, rstd) of layer_norm over the trailing `ndims` dims of float32/float64 `x`, or None to use NumPy."""
    if x.dtype not in (np.float32, np.float64) or any(p is not None and p.dtype != x.dtype for p in (w, b)):
        return None
    fn = kernel_for(_SOURCE, "layer_norm_rows", xp, x.dtype, x.size, fastmath={"reassoc"})
    if fn is None:
        return None
    note("layer_norm", "compiled rows")
    rows, n, _ = _rows(x, ndims)
    y = np.empty(x.shape, x.dtype)
    stat = x.shape[:x.ndim - ndims] + (1,) * ndims
    mean, rstd = np.empty(stat, x.dtype), np.empty(stat, x.dtype)
    args = (contiguous(x, (rows, n)), _per_column(w, n, x.dtype, 1), _per_column(b, n, x.dtype, 0), float(eps),
            y.reshape(rows, n), mean.reshape(rows), rstd.reshape(rows))

    parts = _chunks(x.size, rows)
    if len(parts) == 1:
        fn(*args, 0, rows)
    else:
        parallel.run_kernel(fn, parts, args)
    return y, mean, rstd
