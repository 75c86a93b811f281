"""Max pooling forward and backward as compiled kernels (Numba) when the `jit` extra is installed.

NumPy's max pooling makes kh*kw passes over strided views of a padded copy, each with a comparison,
a maximum and an index update; the forward loop nest visits each window once and reads the padding as
-inf without materialising it (used for inputs too large for cache), and the backward adds each output
gradient into its argmax in one pass instead of kh*kw masked passes. The window-local argmax and NaN rule (a NaN wins, the last one of a window)
are exactly those of the NumPy path in pool.py, which runs without Numba or for other dtypes.
"""

from __future__ import annotations

import numpy as np

from ember.ops.compiled import kernel_for

_SOURCE = '''
import numpy as np


def max_pool2d(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for n in range(N):
        for c in range(C):
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
'''


# NumPy's forward makes one vectorised pass per tap, which beats this scalar loop while the input
# stays in cache (LeNet's 1.2 MB maps: 0.5 ms against 0.8 ms) and loses once every pass goes to memory
# (ResNet-18's 100 MB map at batch 32: 390 ms against 235 ms).
_FORWARD_MIN_BYTES = 8 << 20


def max_pool2d_compiled(xp, x, kernel, stride, padding, dilation, oh, ow):
    """(values, window-local argmax) of max pooling NCHW `x`, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "max_pool2d", xp, x.dtype, x.size)
    if fn is None or x.nbytes < _FORWARD_MIN_BYTES:
        return None
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    idx = np.empty(out.shape, np.int64)
    fn(np.ascontiguousarray(x), kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0],
       dilation[1], out, idx)
    return out, idx


def max_pool2d_backward_compiled(xp, g, idx, in_shape, kernel, stride, padding, dilation):
    """The input gradient of max pooling from the output's and the window-local argmax, or None to use NumPy."""
    fn = kernel_for(_SOURCE, "max_pool2d_backward", xp, g.dtype, int(np.prod(in_shape)))
    if fn is None:
        return None
    gx = np.empty(tuple(in_shape), g.dtype)
    fn(np.ascontiguousarray(g), np.ascontiguousarray(idx), kernel[0], kernel[1], stride[0], stride[1], padding[0],
       padding[1], dilation[0], dilation[1], gx)
    return gx
