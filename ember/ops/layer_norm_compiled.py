"""Layer norm's gradient as one op: (gx, gw, gb) from x, w, the saved mean and rstd, and gy; and the compiled
forward rows that layer_norm's kernel uses.

Written in tensor ops the rule is about a dozen ops, each a pass over the activations with its own
temporary (and under ember.jit a fused region whose three full-size outputs cost more than the
arithmetic). PyTorch has native_layer_norm_backward for the same reason. The NumPy kernel follows the
composite rule of nn_extra.py; the compiled one (the `jit` extra, float32/float64) makes one pass per
row that reads x and gy, a second over the same row while it is in cache; it sums rows in the data's dtype and
the weight's and bias's columns in float64. From 1 M values both split their rows over the batch threads.
Under `create_graph=True`, or when the statistics' own gradients are needed, the composite rule is
recorded instead, so higher derivatives exist. The forward's compiled rows sum each row (in vector lanes, in the
data's dtype, as PyTorch does) and write it while it is in cache, where NumPy makes six passes with temporaries.
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError, fmt_shape
from ember.ops import batch_threads
from ember.ops._rules import spec
from ember.ops.compiled import MIN_ELEMENTS, contiguous, kernel_for
from ember.ops.opmath import opmath, rounded, upcast
from ember.ops.registry import Op, register

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


class LayerNormBackwardOp(Op):
    """(gx, gw, gb) of layer_norm over the trailing `ndims` dims; gw and gb in the statistics' dtype."""

    name = "layer_norm_backward"
    n_outputs = 3
    fresh_output = True
    differentiable = False  # under create_graph the composite rule in nn_extra.py is recorded instead

    def infer(self, x, w, mean, rstd, gy, ndims):
        if tuple(gy.shape) != tuple(x.shape):
            raise ShapeError(f"layer_norm_backward: output gradient {fmt_shape(gy.shape)} does not match the input "
                             f"{fmt_shape(x.shape)}")
        tail = tuple(x.shape[len(x.shape) - ndims:])
        stat = opmath(x.dtype)
        return spec(tuple(x.shape), x.dtype), spec(tail, stat), spec(tail, stat)

    def kernel(self, xp, x, w, mean, rstd, gy, ndims):
        dtype = x.dtype
        fast = _compiled(xp, x, w, mean, rstd, gy, ndims)
        if fast is not None:
            return fast
        x, gy = upcast(x), upcast(gy).astype(upcast(x).dtype, copy=False)
        axes = tuple(range(x.ndim - ndims, x.ndim))
        batch = tuple(range(x.ndim - ndims))
        xhat = (x - mean) * rstd
        gw = (gy * xhat).sum(axis=batch)
        gb = gy.sum(axis=batch)
        gxhat = gy if w is None else gy * upcast(w).astype(x.dtype, copy=False)
        gx = gxhat - gxhat.mean(axis=axes, keepdims=True)
        gx -= xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= rstd
        return rounded(gx, dtype), xp.asarray(gw), xp.asarray(gb)


def _rows(x, ndims: int):
    """(rows, values per row, the normalised dims' shape): x as the (rows, n) matrix the kernels walk."""
    tail = x.shape[x.ndim - ndims:]
    n = int(np.prod(tail))
    return (x.size // n if n else 0), n, tail


def _per_column(p, n: int, dtype, fill):
    """A weight or bias as n contiguous values (`fill` everywhere when it is absent)."""
    return np.full(n, fill, dtype) if p is None else contiguous(p, n)


def _compiled(xp, x, w, mean, rstd, gy, ndims):
    """The compiled kernel's (gx, gw, gb) over rows of the normalised size, or None to use NumPy."""
    if x.dtype not in (np.float32, np.float64) or gy.dtype != x.dtype or mean.dtype != x.dtype \
            or (w is not None and w.dtype != x.dtype):
        return None
    # every size: one call replaces the dozen ops of the composite rule
    fn = kernel_for(_SOURCE, "layer_norm_backward_rows", xp, x.dtype, max(x.size, MIN_ELEMENTS), fastmath={"reassoc"})
    if fn is None:
        return None
    rows, n, tail = _rows(x, ndims)
    gx = np.empty(x.shape, x.dtype)
    args = (contiguous(x, (rows, n)), contiguous(gy, (rows, n)), contiguous(mean, rows), contiguous(rstd, rows),
            _per_column(w, n, x.dtype, 1), gx.reshape(rows, n))

    def chunk(r0: int, r1: int):
        sums = np.zeros((2, n))  # this chunk's column sums of the weight's and bias's gradients, in float64
        fn(*args, sums[0], sums[1], r0, r1)
        return sums

    sums = sum(batch_threads.run_if(chunk, rows, x.size >= _SPLIT_MIN))
    return gx, sums[0].astype(x.dtype).reshape(tail), sums[1].astype(x.dtype).reshape(tail)


# From this many values the rows are split over the batch threads: at (16384, 64) the forward went from 385 to
# 218 us and the gradient from 497 to 300 (PyTorch 360 and 219); at (1024, 128) the hand-off cost more than it
# gained (forward 39 -> 68 us)
_SPLIT_MIN = 1 << 20

layer_norm_backward_op = register(LayerNormBackwardOp())


def layer_norm_compiled(xp, x, w, b, ndims: int, eps: float):
    """(y, mean, rstd) of layer_norm over the trailing `ndims` dims of float32/float64 `x`, or None to use NumPy."""
    if x.dtype not in (np.float32, np.float64) or any(p is not None and p.dtype != x.dtype for p in (w, b)):
        return None
    fn = kernel_for(_SOURCE, "layer_norm_rows", xp, x.dtype, x.size, fastmath={"reassoc"})
    if fn is None:
        return None
    rows, n, _ = _rows(x, ndims)
    y = np.empty(x.shape, x.dtype)
    stat = x.shape[:x.ndim - ndims] + (1,) * ndims
    mean, rstd = np.empty(stat, x.dtype), np.empty(stat, x.dtype)
    args = (contiguous(x, (rows, n)), _per_column(w, n, x.dtype, 1), _per_column(b, n, x.dtype, 0), float(eps),
            y.reshape(rows, n), mean.reshape(rows), rstd.reshape(rows))
    batch_threads.run_if(lambda r0, r1: fn(*args, r0, r1), rows, x.size >= _SPLIT_MIN)
    return y, mean, rstd
