"""Depthwise convolution (one input channel per group, m filters each) as compiled kernels (Numba).

Each works one (sample, channel) plane at a time, so the plane stays in cache while all kh*kw taps
pass over it. They run for strided layers only: there NumPy's taps are strided views, its input
gradient is a GEMM and a col2im per group, and these loops win (MobileNetV2's stride-2 layer at batch 8:
forward 32 -> 17 ms, input gradient 95 -> 22 ms, weight gradient 52 -> 19 ms). With stride 1 NumPy's
contiguous, vectorised taps beat these scalar loops (Numba cannot prove the arrays do not alias, so it
does not vectorise them), and conv.py keeps its NumPy paths, as it does without Numba or for other dtypes.
"""

from __future__ import annotations

import numpy as np

from ember.ops.compiled import kernel_for

_SOURCE = '''
def depthwise_forward(x, w, sh, sw, pt, pl, dh, dw, out):
    # out[n, c*m + q, y, xx] = sum_ij x[n, c, y*sh - pt + i*dh, xx*sw - pl + j*dw] * w[c*m + q, 0, i, j]
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    m = O // C
    oh, ow = out.shape[2], out.shape[3]
    for t in range(N * O):
        n = t // O
        o = t % O
        c = o // m
        plane = out[n, o]
        plane[:, :] = 0
        for i in range(kh):
            for j in range(kw):
                wv = w[o, 0, i, j]
                off = j * dw - pl
                lo = 0 if off >= 0 else (-off + sw - 1) // sw  # output columns reading inside the input
                hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if W - 1 - off >= 0 else lo
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    src = x[n, c, iy]
                    dst = plane[y]
                    for xx in range(lo, hi):
                        dst[xx] += wv * src[xx * sw + off]


def depthwise_input_grad(g, w, sh, sw, pt, pl, dh, dw, gx):
    # the adjoint of depthwise_forward: gx[n, c, iy, ix] += g[n, c*m + q, y, xx] * w[c*m + q, 0, i, j]
    N, C, H, W = gx.shape
    O, _, kh, kw = w.shape
    m = O // C
    oh, ow = g.shape[2], g.shape[3]
    for t in range(N * C):
        n = t // C
        c = t % C
        plane = gx[n, c]
        plane[:, :] = 0
        for q in range(m):
            o = c * m + q
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, 0, i, j]
                    off = j * dw - pl
                    lo = 0 if off >= 0 else (-off + sw - 1) // sw  # output columns reading inside the input
                    hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if W - 1 - off >= 0 else lo
                    for y in range(oh):
                        iy = y * sh - pt + i * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = g[n, o, y]
                        dst = plane[iy]
                        for xx in range(lo, hi):
                            dst[xx * sw + off] += wv * src[xx]


def depthwise_weight_grad(x, g, sh, sw, pt, pl, dh, dw, gw):
    # gw[c*m + q, 0, i, j] = sum over n, y, xx of g[n, c*m + q, y, xx] * x[n, c, iy, ix]
    N, C, H, W = x.shape
    O, _, kh, kw = gw.shape
    m = O // C
    oh, ow = g.shape[2], g.shape[3]
    for o in range(O):
        c = o // m
        for i in range(kh):
            for j in range(kw):
                off = j * dw - pl
                lo = 0 if off >= 0 else (-off + sw - 1) // sw  # output columns reading inside the input
                hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if W - 1 - off >= 0 else lo
                acc = 0.0
                for n in range(N):
                    for y in range(oh):
                        iy = y * sh - pt + i * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = x[n, c, iy]
                        gr = g[n, o, y]
                        for xx in range(lo, hi):
                            acc += gr[xx] * src[xx * sw + off]
                gw[o, 0, i, j] = acc
'''


def _pays(stride) -> bool:
    return tuple(stride) != (1, 1)


def forward(xp, x, w, stride, pad, dil, oh, ow):
    """Depthwise conv2d of x (N, C, H, W) with w (C*m, 1, kh, kw), or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_forward", xp, x.dtype, x.size)
    if fn is None or not _pays(stride) or w.dtype != x.dtype:
        return None
    out = np.empty((x.shape[0], w.shape[0], oh, ow), x.dtype)
    fn(np.ascontiguousarray(x), np.ascontiguousarray(w), stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], out)
    return out


def input_grad(xp, g, w, channels, stride, pad, dil, in_hw):
    """The input gradient (N, channels, *in_hw) of a depthwise conv2d from its output's g, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_input_grad", xp, g.dtype, g.size)
    if fn is None or not _pays(stride) or w.dtype != g.dtype:
        return None
    gx = np.empty((g.shape[0], channels) + tuple(in_hw), g.dtype)
    fn(np.ascontiguousarray(g), np.ascontiguousarray(w), stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], gx)
    return gx


def weight_grad(xp, x, g, stride, pad, dil, kh, kw):
    """The weight gradient (C*m, 1, kh, kw) of a depthwise conv2d, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "depthwise_weight_grad", xp, x.dtype, x.size)
    if fn is None or not _pays(stride) or g.dtype != x.dtype:
        return None
    gw = np.empty((g.shape[1], 1, kh, kw), x.dtype)
    fn(np.ascontiguousarray(x), np.ascontiguousarray(g), stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], gw)
    return gw
