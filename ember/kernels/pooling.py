"""Max pooling forward and backward as compiled kernels (Numba) when the `jit` extra is installed.

NumPy's max pooling makes kh*kw passes over strided views of a padded copy, each with a comparison,
a maximum and an index update; the forward visits each window once and reads the padding as -inf without
materialising it, its planes split over the batch threads. Windows of up to 7x7 run a kernel generated for
their geometry, with the taps written out for the windows inside the input (`_taps_source`); larger ones a
general loop nest (from 1 MB inputs). The backward adds each output gradient into its argmax in one pass
instead of kh*kw masked passes. The commonest pooling (2x2 windows at stride 2, no padding) has its own pair
of loops with the taps written out, which vectorise and run at every size (split over the batch threads
from 1 MB). The window-local argmax and NaN rule (a NaN wins, the last one of a window) are exactly those of
the NumPy path in pool.py, which runs without Numba or for other dtypes.
"""

from __future__ import annotations

import functools

import numpy as np

from ember.kernels import parallel
from ember.kernels.numba_loader import kernel_for
from ember.kernels.selection import Algorithm, Table, algorithms, always, compiled_or_numpy, note

_SOURCE = '''
import numpy as np


def max_pool2d(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx, t0, t1):
    # planes t0..t1 of the N*C (sample, channel) planes
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for t in range(t0, t1):
        n = t // C
        c = t % C
        for y in range(oh):
            for xx in range(ow):
                best = -np.inf  # a tap outside the input is -inf, which never wins: it is skipped
                arg = 0
                for i in range(kh):
                    iy = y * sh - ph + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    for j in range(kw):
                        ix = xx * sw - pw + j * dw
                        if ix < 0 or ix >= W:
                            continue
                        v = x[n, c, iy, ix]
                        if v > best or v != v:
                            best = v
                            arg = i * kw + j
                out[n, c, y, xx] = best
                idx[n, c, y, xx] = arg


def max_pool2d_backward(g, idx, kh, kw, sh, sw, ph, pw, dh, dw, gx):
    N, C, H, W = gx.shape
    oh, ow = g.shape[2], g.shape[3]
    for t in range(N * C):
        n = t // C
        c = t % C
        for y in range(H):
            for xx in range(W):
                gx[n, c, y, xx] = 0
        for y in range(oh):
            for xx in range(ow):
                k = idx[n, c, y, xx]
                iy = y * sh - ph + (k // kw) * dh
                ix = xx * sw - pw + (k % kw) * dw
                if iy >= 0 and iy < H and ix >= 0 and ix < W:
                    gx[n, c, iy, ix] += g[n, c, y, xx]


def max_pool2d_2x2(x, out, idx, t0, t1):
    # 2x2 windows at stride 2, no padding, planes t0..t1: the four taps written out, so the loop over a row
    # vectorises
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for t in range(t0, t1):
        n = t // C
        c = t % C
        for y in range(oh):
            for xx in range(ow):
                best = x[n, c, 2 * y, 2 * xx]
                arg = 0
                v = x[n, c, 2 * y, 2 * xx + 1]
                if v > best or v != v:
                    best = v
                    arg = 1
                v = x[n, c, 2 * y + 1, 2 * xx]
                if v > best or v != v:
                    best = v
                    arg = 2
                v = x[n, c, 2 * y + 1, 2 * xx + 1]
                if v > best or v != v:
                    best = v
                    arg = 3
                out[n, c, y, xx] = best
                idx[n, c, y, xx] = arg


def max_pool2d_2x2_backward(g, idx, gx, t0, t1):
    N, C, H, W = gx.shape
    oh, ow = g.shape[2], g.shape[3]
    zero = gx.dtype.type(0)
    for t in range(t0, t1):
        n = t // C
        c = t % C
        for y in range(oh):
            for xx in range(ow):
                k = idx[n, c, y, xx]
                v = g[n, c, y, xx]
                gx[n, c, 2 * y, 2 * xx] = v if k == 0 else zero
                gx[n, c, 2 * y, 2 * xx + 1] = v if k == 1 else zero
                gx[n, c, 2 * y + 1, 2 * xx] = v if k == 2 else zero
                gx[n, c, 2 * y + 1, 2 * xx + 1] = v if k == 3 else zero
        for y in range(2 * oh, H):  # an odd row or column left out of every window
            for xx in range(W):
                gx[n, c, y, xx] = zero
        for y in range(2 * oh):
            for xx in range(2 * ow, W):
                gx[n, c, y, xx] = zero
'''


# The window-local argmax's dtype (pool.py's too): int32, not int64, since the loops that store it vectorise only
# then (LeNet-5's first pooling, 2x2 over (64, 6, 28, 28), one thread: 251 -> 80 us); flat indices are int64.
LOCAL_INDEX = np.dtype(np.int32)
_MAX_UNROLLED_TAPS = 49  # windows up to 7x7 get a kernel with their taps written out; larger ones the loop above


@functools.cache
def _taps_source(kh: int, kw: int, sh: int, sw: int, dh: int, dw: int) -> str:
    """Source of `max_pool2d_taps` for one window geometry: for the output columns whose windows lie inside the
    input (every row but the edges) the kh*kw taps are written out with constant offsets, as select chains in the
    general loop's order and NaN rule, so a row is one straight loop; edge windows take `window_max`, the general
    loop's body. ResNet-18's stem pooling (3x3 at stride 2 over (1, 64, 112, 112)), one thread: 4.9 -> 1.4 ms."""
    taps = []
    for i in range(kh):
        for j in range(kw):
            k = i * kw + j
            read = f"r{i}[u(xx * {sw} + {j * dw} - pw)]"
            if k == 0:  # the first tap always wins against the -inf start (or ties it at -inf with argmax 0)
                taps += [f"                b = {read}", "                a = 0"]
            else:
                taps += [f"                v = {read}", "                t = (v > b) | (v != v)",
                         "                b = v if t else b", f"                a = {k} if t else a"]
    rows = "\n".join(f"            r{i} = x[n, c, top + {i * dh}]" for i in range(kh))
    reach_y, reach_x = (kh - 1) * dh, (kw - 1) * dw
    return f'''
import numpy as np
from numba import njit


@njit(inline="always")
def u(i):
    return np.uint64(i)


@njit
def window_max(x, n, c, y, xx, ph, pw, out, idx):
    H, W = x.shape[2], x.shape[3]
    best = -np.inf
    arg = 0
    for i in range({kh}):
        iy = y * {sh} - ph + i * {dh}
        if iy < 0 or iy >= H:
            continue
        for j in range({kw}):
            ix = xx * {sw} - pw + j * {dw}
            if ix < 0 or ix >= W:
                continue
            v = x[n, c, iy, ix]
            if v > best or v != v:
                best = v
                arg = i * {kw} + j
    out[n, c, y, xx] = best
    idx[n, c, y, xx] = arg


def max_pool2d_taps(x, ph, pw, out, idx, t0, t1):
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    x_lo = min(ow, (pw + {sw - 1}) // {sw})  # columns [x_lo, x_hi) read inside the row with every tap
    last = W - 1 + pw - {reach_x}
    x_hi = max(x_lo, min(ow, last // {sw} + 1)) if last >= 0 else x_lo
    for t in range(t0, t1):
        n = t // C
        c = t % C
        for y in range(oh):
            top = y * {sh} - ph
            if top < 0 or top + {reach_y} >= H:
                for xx in range(ow):
                    window_max(x, n, c, y, xx, ph, pw, out, idx)
                continue
            for xx in range(x_lo):
                window_max(x, n, c, y, xx, ph, pw, out, idx)
            for xx in range(x_hi, ow):
                window_max(x, n, c, y, xx, ph, pw, out, idx)
{rows}
            o = out[n, c, y]
            q = idx[n, c, y]
            for xx in range(x_lo, x_hi):
{chr(10).join(taps)}
                o[xx] = b
                q[xx] = a
'''


def _is_2x2(kernel, stride, padding, dilation) -> bool:
    """Whether the pooling is 2x2 windows at stride 2 without padding or dilation (every window inside)."""
    return tuple(kernel) == (2, 2) and tuple(stride) == (2, 2) and not any(padding) and tuple(dilation) == (1, 1)


MAX_POOL2D = Table("max_pool2d", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, "
                   "2026-11-27", values={
    "general_min_bytes": (1 << 20, "NumPy's forward (a vectorised pass per tap over a padded copy) beats the general "
                                   "loop on small inputs; from this size that loop runs with its planes split over the "
                                   "threads, which NumPy's passes are not"),
    "split_2x2_min_bytes": (1 << 20, "the 2x2 loops split their planes over the threads from this input size "
                                     "(LeNet-5's first pooling, 1.2 MB: 0.31 -> 0.21 ms forward; 0.4 MB: the hand-off "
                                     "cost more than it gained)"),
    "native_split_2x2_min_bytes": (1 << 17, "... from this size where the workers run compiled chunks without the GIL "
                                            "((32, 16, 10, 10): 23 -> 17 us forward, 33 -> 23 us backward)"),
})
algorithms("max_pool2d", [
    Algorithm("compiled 2x2", "2x2 windows at stride 2, no padding or dilation, float32/float64, 16384+ values, "
              "Numba; planes split from split_2x2_min_bytes", None),
    Algorithm("compiled taps", f"windows of at most {_MAX_UNROLLED_TAPS} taps written out, 16384+ values, Numba (3x3 "
              "at stride 2: 162 -> 120 us at (4, 16, 16, 16); ResNet-18's stem pooling 2.65 -> 0.77 ms)", None),
    Algorithm("compiled general loop", "larger windows from general_min_bytes, Numba", None),
    Algorithm("numpy", "otherwise: a vectorised pass per tap", always),
])
compiled_or_numpy("max_pool2d_backward", "compiled", "16384+ float32/float64 values, Numba (2x2 planes split as the "
                  "forward's)")


def _split_2x2(nbytes: int) -> bool:
    """Whether a 2x2 pooling of an nbytes input splits its planes over the threads."""
    return nbytes >= MAX_POOL2D["native_split_2x2_min_bytes" if parallel.native() else "split_2x2_min_bytes"]


def max_pool2d_compiled(xp, x, kernel, stride, padding, dilation, oh, ow):
    """(values, window-local argmax) of max pooling NCHW `x`, or None to use NumPy."""
    two_by_two = _is_2x2(kernel, stride, padding, dilation)
    unrolled = not two_by_two and kernel[0] * kernel[1] <= _MAX_UNROLLED_TAPS
    if not two_by_two and not unrolled and x.nbytes < MAX_POOL2D["general_min_bytes"]:
        return None
    if two_by_two:
        fn = kernel_for(_SOURCE, "max_pool2d_2x2", xp, x.dtype, x.size)
    elif unrolled:
        fn = kernel_for(_taps_source(*kernel, *stride, *dilation), "max_pool2d_taps", xp, x.dtype, x.size)
    else:
        fn = kernel_for(_SOURCE, "max_pool2d", xp, x.dtype, x.size)
    if fn is None:
        return None
    note("max_pool2d", "compiled 2x2" if two_by_two else "compiled taps" if unrolled else "compiled general loop")
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    idx = np.empty(out.shape, LOCAL_INDEX)
    x = np.ascontiguousarray(x)
    if two_by_two:
        parallel.run_kernel(fn, (parallel.chunks(x.shape[0] * x.shape[1]) if _split_2x2(x.nbytes) else [(0, x.shape[0] * x.shape[1])]),
                                 (x, out, idx))
        return out, idx
    if unrolled:
        parallel.run_kernel(fn, parallel.chunks(x.shape[0] * x.shape[1]), (x, padding[0], padding[1], out, idx))
        return out, idx
    args = (x, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], out, idx)
    parallel.run_kernel(fn, parallel.chunks(x.shape[0] * x.shape[1]), args)
    return out, idx


def max_pool2d_backward_compiled(xp, g, idx, in_shape, kernel, stride, padding, dilation):
    """The input gradient of max pooling from the output's and the window-local argmax, or None to use NumPy."""
    two_by_two = _is_2x2(kernel, stride, padding, dilation)
    size = int(np.prod(in_shape))
    fn = kernel_for(_SOURCE, "max_pool2d_2x2_backward" if two_by_two else "max_pool2d_backward", xp, g.dtype, size)
    if fn is None:
        return None
    note("max_pool2d_backward", "compiled")
    gx = np.empty(tuple(in_shape), g.dtype)
    g, idx = np.ascontiguousarray(g), np.ascontiguousarray(idx)
    if two_by_two:
        parallel.run_kernel(fn, (parallel.chunks(gx.shape[0] * gx.shape[1]) if _split_2x2(gx.nbytes) else [(0, gx.shape[0] * gx.shape[1])]),
                                 (g, idx, gx))
    else:
        fn(g, idx, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], gx)
    return gx
