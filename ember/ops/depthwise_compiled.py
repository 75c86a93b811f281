"""Depthwise convolution (one input channel per group, m filters each) as compiled kernels (Numba).

Each works one (sample, channel) plane at a time, so the plane stays in cache while all kh*kw taps
pass over it, and the planes are split over the batch threads. The arrays are flat and indexed with
unsigned offsets: Numba wraps a possibly negative index around, and that test kept the loops from
vectorising (a 4-D indexed version ran 4-8x slower than this and lost to NumPy's taps at stride 1).
MobileNetV2's (32, 384, 14, 14) stride-1 layer: 29 ms with NumPy's taps, 5.8 ms here on one thread.
Without Numba, or for other dtypes, conv.py runs its NumPy paths.
"""

from __future__ import annotations

import numpy as np

from ember.ops import batch_threads
from ember.ops.compiled import contiguous, kernel_for

_SOURCE = '''
import numpy as np
from numba import njit


@njit(inline="always")
def _columns(off, sw, ow, W):
    # output columns lo <= xx < hi whose input column xx*sw + off lies inside [0, W)
    lo = 0 if off >= 0 else (sw - 1 - off) // sw
    hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if W - 1 - off >= 0 else lo
    return lo, hi


def depthwise_forward(x, w, C, H, W, sh, sw, pt, pl, dh, dw, oh, ow, out, t0, t1):
    # out[n, c*m + q, y, xx] = sum_ij x[n, c, y*sh - pt + i*dh, xx*sw - pl + j*dw] * w[c*m + q, 0, i, j]
    # x and out flat; planes t = n*O + o for t0 <= t < t1
    O, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    m = O // C
    zero = out.dtype.type(0)
    for t in range(t0, t1):
        n = t // O
        o = t % O
        ob = t * oh * ow
        xb = (n * C + o // m) * H * W
        for k in range(oh * ow):
            out[np.uint64(ob + k)] = zero
        for i in range(kh):
            for j in range(kw):
                wv = w[o, 0, i, j]
                off = j * dw - pl
                lo, hi = _columns(off, sw, ow, W)
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    d = ob + y * ow
                    s = xb + iy * W + off
                    for xx in range(lo, hi):
                        out[np.uint64(d + xx)] += wv * x[np.uint64(s + xx * sw)]


def depthwise_input_grad(g, w, C, H, W, sh, sw, pt, pl, dh, dw, oh, ow, gx, t0, t1):
    # the adjoint of depthwise_forward: gx[n, c, iy, ix] += g[n, c*m + q, y, xx] * w[c*m + q, 0, i, j]
    # planes t = n*C + c for t0 <= t < t1
    O, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    m = O // C
    zero = gx.dtype.type(0)
    for t in range(t0, t1):
        n = t // C
        c = t % C
        xb = t * H * W
        for k in range(H * W):
            gx[np.uint64(xb + k)] = zero
        for q in range(m):
            o = c * m + q
            gb = (n * O + o) * oh * ow
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, 0, i, j]
                    off = j * dw - pl
                    lo, hi = _columns(off, sw, ow, W)
                    for y in range(oh):
                        iy = y * sh - pt + i * dh
                        if iy < 0 or iy >= H:
                            continue
                        d = xb + iy * W + off
                        s = gb + y * ow
                        for xx in range(lo, hi):
                            gx[np.uint64(d + xx * sw)] += wv * g[np.uint64(s + xx)]


def depthwise_weight_grad(x, g, N, C, H, W, sh, sw, pt, pl, dh, dw, oh, ow, gw, o0, o1):
    # gw[c*m + q, 0, i, j] = sum over n, y, xx of g[n, c*m + q, y, xx] * x[n, c, iy, ix], for o0 <= o < o1
    O, kh, kw = gw.shape[0], gw.shape[2], gw.shape[3]
    m = O // C
    for o in range(o0, o1):
        c = o // m
        for i in range(kh):
            for j in range(kw):
                off = j * dw - pl
                lo, hi = _columns(off, sw, ow, W)
                acc = 0.0
                for n in range(N):
                    xb = (n * C + c) * H * W
                    gb = (n * O + o) * oh * ow
                    for y in range(oh):
                        iy = y * sh - pt + i * dh
                        if iy < 0 or iy >= H:
                            continue
                        s = xb + iy * W + off
                        d = gb + y * ow
                        for xx in range(lo, hi):
                            acc += g[np.uint64(d + xx)] * x[np.uint64(s + xx * sw)]
                gw[o, 0, i, j] = acc
'''



def _split(fn, total: int, flops: float, *args):
    """fn(*args, start, stop) over [0, total) split over the batch threads when the work is large enough."""
    batch_threads.run(lambda a, b: fn(*args, a, b), total, flops)


def forward(xp, x, w, stride, pad, dil, oh, ow):
    """Depthwise conv2d of x (N, C, H, W) with w (C*m, 1, kh, kw), or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_forward", xp, x.dtype, x.size)
    if fn is None or w.dtype != x.dtype:
        return None
    n, c, h, wd = x.shape
    out = np.empty((n, w.shape[0], oh, ow), x.dtype)
    _split(fn, n * w.shape[0], 2 * out.size * w.shape[2] * w.shape[3], contiguous(x), np.ascontiguousarray(w), c, h, wd,
           stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], oh, ow, out.reshape(-1))
    return out


def input_grad(xp, g, w, channels, stride, pad, dil, in_hw):
    """The input gradient (N, channels, *in_hw) of a depthwise conv2d from its output's g, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_input_grad", xp, g.dtype, g.size)
    if fn is None or w.dtype != g.dtype:
        return None
    n = g.shape[0]
    gx = np.empty((n, channels) + tuple(in_hw), g.dtype)
    _split(fn, n * channels, 2 * g.size * w.shape[2] * w.shape[3], contiguous(g), np.ascontiguousarray(w), channels,
           in_hw[0], in_hw[1], stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], g.shape[2], g.shape[3],
           gx.reshape(-1))
    return gx


def weight_grad(xp, x, g, stride, pad, dil, kh, kw):
    """The weight gradient (C*m, 1, kh, kw) of a depthwise conv2d, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_weight_grad", xp, x.dtype, x.size, fastmath={"reassoc"})
    if fn is None or g.dtype != x.dtype:
        return None
    n, c, h, wd = x.shape
    gw = np.empty((g.shape[1], 1, kh, kw), x.dtype)
    _split(fn, g.shape[1], 2 * g.size * kh * kw, contiguous(x), contiguous(g), n, c, h, wd, stride[0], stride[1], pad[0],
           pad[2], dil[0], dil[1], g.shape[2], g.shape[3], gw)
    return gw
