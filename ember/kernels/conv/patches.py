"""im2col and col2im as compiled kernels (Numba) when the `jit` extra is installed.

NumPy builds convolution patches by padding the input and copying a six-dimensional strided view,
which runs at a fraction of memory bandwidth; these loop nests write each patch row once. A stride-1
undilated layer reads its input directly (unpadded) or from one padded (sample, channel) plane at a time, with
no bounds tests, so the copies vectorise; a strided layer with large kernels first splits its input into
phase planes, from which every patch row is a contiguous copy; other layers read the padding as zeros
without materialising it, with a bounds test per value or per row. col2im, its adjoint, sums patches back into an NCHW image one
(sample, channel) plane at a time, so the plane stays in cache while every kernel tap adds into it (at stride 1, a
scratch plane that covers the padding, with no bounds tests);
NumPy's version is a loop of strided adds over the whole padded image per tap. Without Numba (or
with EMBER_FUSION_BACKEND=numpy) the NumPy paths in conv.py are used, with the same values.
"""

from __future__ import annotations

import numpy as np

from ember.kernels.numba_loader import kernel_for

_SOURCE = '''
import numpy as np
from numba import njit


@njit(inline="always")
def u(i):
    # an unsigned index: Numba wraps a possibly negative one around, and that test is paid per element
    return np.uint64(i)


def im2col(x, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, out, per_sample):
    # out[n, (c*kh + i)*kw + j, y*ow + x] (per_sample) or out[(c*kh + i)*kw + j, n, y*ow + x]
    N, C, H, W = x.shape
    for t in range(N * C):
        n = t // C
        c = t % C
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    base = y * ow
                    for xx in range(ow):
                        ix = xx * sw - pl + j * dw
                        v = x[n, c, iy, ix] if (iy >= 0 and iy < H and ix >= 0 and ix < W) else x.dtype.type(0)
                        if per_sample:
                            out[n, row, base + xx] = v
                        else:
                            out[row, n, base + xx] = v


def im2col_valid(x, kh, kw, oh, ow, out, per_sample):
    # im2col's patches (same layouts) of a stride-1, unpadded, undilated convolution: every read is in bounds and
    # every index steps by a unit known when compiling, so the row copies vectorise (a run-time step, even a
    # dilation of 1, kept them scalar: 4x slower)
    N, C = x.shape[0], x.shape[1]
    for n in range(N):
        for c in range(C):
            img = x[n, c]
            for i in range(kh):
                for j in range(kw):
                    r = (c * kh + i) * kw + j
                    row = out[n, r] if per_sample else out[r, n]
                    for y in range(oh):
                        for xx in range(ow):
                            row[y * ow + xx] = img[y + i, xx + j]


def im2col_plane(x, kh, kw, pt, pl, oh, ow, out, per_sample, plane):
    # im2col_valid for a padded layer: each input plane is first copied into `plane`, a zeroed scratch image of the
    # padded size whose border stays zero (the padding), and every patch row is then read from it in bounds. Kept
    # apart from im2col_valid: one kernel choosing its source per plane ran 3-27% slower on both kinds of layer
    N, C, H, W = x.shape
    for n in range(N):
        for c in range(C):
            img = x[n, c]
            for y in range(H):
                for xx in range(W):
                    plane[y + pt, xx + pl] = img[y, xx]
            for i in range(kh):
                for j in range(kw):
                    r = (c * kh + i) * kw + j
                    row = out[n, r] if per_sample else out[r, n]
                    for y in range(oh):
                        for xx in range(ow):
                            row[y * ow + xx] = plane[y + i, xx + j]


def im2col_strided(x, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, out, per_sample):
    # im2col for strided layers: each patch row's in-bounds columns [lo, hi) found once per kernel tap, so the
    # gather loop has no bounds test, and flat arrays with unsigned offsets (x and out C-contiguous)
    N, C, H, W = x.shape
    xf = x.reshape(-1)
    of = out.reshape(-1)
    L = oh * ow
    R = C * kh * kw
    zero = x.dtype.type(0)
    for t in range(N * C):
        n = t // C
        c = t % C
        src0 = (n * C + c) * H * W
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                dst0 = (n * R + row) * L if per_sample else (row * N + n) * L
                off = j * dw - pl  # output column xx reads input column xx*sw + off
                lo = 0 if off >= 0 else min(ow, (sw - 1 - off) // sw)
                hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if off <= W - 1 else lo
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    d = dst0 + y * ow
                    if iy < 0 or iy >= H:
                        for xx in range(ow):
                            of[u(d + xx)] = zero
                        continue
                    for xx in range(lo):
                        of[u(d + xx)] = zero
                    src = src0 + iy * W + off
                    for xx in range(lo, hi):
                        of[u(d + xx)] = xf[u(src + xx * sw)]
                    for xx in range(hi, ow):
                        of[u(d + xx)] = zero


def phases(x, sh, sw, pt, pl, ph):
    # ph[n, c, a, b, y, x] = x[n, c, y*sh + a - pt, x*sw + b - pl] (zero outside x): the strided input's
    # sh*sw phase planes, in which each kernel tap of a strided convolution reads a contiguous window
    N, C, H, W = x.shape
    hq, wq = ph.shape[4], ph.shape[5]
    zero = x.dtype.type(0)
    for t in range(N * C):
        n = t // C
        c = t % C
        for a in range(sh):
            for y in range(hq):
                iy = y * sh + a - pt
                for b in range(sw):
                    row = ph[n, c, a, b, y]
                    if iy < 0 or iy >= H:
                        for xx in range(wq):
                            row[xx] = zero
                        continue
                    for xx in range(wq):
                        ix = xx * sw + b - pl
                        row[xx] = x[n, c, iy, ix] if (ix >= 0 and ix < W) else zero


def im2col_phased(ph, kh, kw, sh, sw, dh, dw, oh, ow, out, per_sample):
    # im2col's patches (same layouts) of a strided convolution from the input's phase planes (see phases):
    # tap (i, j) reads plane ((i*dh) % sh, (j*dw) % sw) shifted by ((i*dh) // sh, (j*dw) // sw), whole
    # contiguous rows, with no bounds to check (the planes hold the padding). Row views with loop-variable
    # indices: flat arrays indexed by computed offsets ran 3-8x slower (each index checked for wraparound).
    N, C = ph.shape[0], ph.shape[1]
    for t in range(N * C):
        n = t // C
        c = t % C
        for i in range(kh):
            a = (i * dh) % sh
            oy = (i * dh) // sh
            for j in range(kw):
                b = (j * dw) % sw
                ox = (j * dw) // sw
                row = (c * kh + i) * kw + j
                dst = out[n, row] if per_sample else out[row, n]
                plane = ph[n, c, a, b]
                for y in range(oh):
                    src = plane[y + oy, ox:ox + ow]
                    part = dst[y * ow:(y + 1) * ow]
                    for xx in range(ow):
                        part[xx] = src[xx]


def col2im_plane(cols, kh, kw, pt, pl, img, plane):
    # col2im of a stride-1 undilated layer: each (sample, channel)'s taps are summed, in col2im's order, into a
    # zeroed scratch plane that also covers the padding, with no bounds tests, and its interior is then copied out
    N, C, H, W = img.shape
    oh, ow = cols.shape[2], cols.shape[3]
    PH, PW = plane.shape
    for n in range(N):
        for c in range(C):
            for y in range(PH):
                for xx in range(PW):
                    plane[y, xx] = 0
            for i in range(kh):
                for j in range(kw):
                    src = cols[(c * kh + i) * kw + j, n]
                    for y in range(oh):
                        for xx in range(ow):
                            plane[y + i, xx + j] += src[y, xx]
            dst = img[n, c]
            for y in range(H):
                for xx in range(W):
                    dst[y, xx] = plane[y + pt, xx + pl]


def col2im(cols, kh, kw, sh, sw, pt, pl, dh, dw, img):
    # img[n, c, y*sh - pt + i*dh, x*sw - pl + j*dw] += cols[(c*kh + i)*kw + j, n, y, x], padding dropped
    N, C, H, W = img.shape
    oh, ow = cols.shape[2], cols.shape[3]
    for t in range(N * C):
        n = t // C
        c = t % C
        for y in range(H):
            for xx in range(W):
                img[n, c, y, xx] = 0
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    for xx in range(ow):
                        ix = xx * sw - pl + j * dw
                        if ix >= 0 and ix < W:
                            img[n, c, iy, ix] += cols[row, n, y, xx]
'''

# The phase planes pay where each input value is read at least this many times: ResNet-18's 7x7 stride-2 stem
# (12x) went from 1.09 to 0.30 ms at batch 1; 3x3 stride-2 layers (2.25x) ran -15% to +6% (short rows).
_PHASED_MIN_REUSE = 4


def col2im_available(xp, dtype, elements: int) -> bool:
    """Whether col2im of `elements` patch values of `dtype` would run compiled."""
    return kernel_for(_SOURCE, "col2im", xp, dtype, elements) is not None


def im2col_compiled(xp, x, kh, kw, stride, pad, dil, oh, ow, per_sample: bool, out=None):
    """Patches of NCHW `x` as (N, C*kh*kw, OH*OW) (per_sample) or (C*kh*kw, N*OH*OW), or None to use NumPy;
    `out`: a flat buffer of that many values to write them into."""
    fn = kernel_for(_SOURCE, "im2col", xp, x.dtype, x.size * kh * kw)
    if fn is None:
        return None
    n, c = x.shape[:2]
    rows = c * kh * kw
    shape = (n, rows, oh * ow) if per_sample else (rows, n, oh * ow)
    out = np.empty(shape, x.dtype) if out is None else out.reshape(shape)
    sh, sw = stride
    if kh * kw >= _PHASED_MIN_REUSE * sh * sw and (sh > 1 or sw > 1):
        # Strided: im2col's reads are gathers (scalar code, 4-7 GB/s). Gathering the input into its phase
        # planes once, then copying contiguous rows from them, gathers each value once instead of about
        # kh*kw/(sh*sw) times and lets the copies vectorise.
        hq, wq = oh + (kh - 1) * dil[0] // sh, ow + (kw - 1) * dil[1] // sw
        ph = np.empty((n, c, sh, sw, hq, wq), x.dtype)
        size = x.size * kh * kw  # the count `fn` was found for: these kernels exist too
        kernel_for(_SOURCE, "phases", xp, x.dtype, size)(np.ascontiguousarray(x), sh, sw, pad[0], pad[2], ph)
        kernel_for(_SOURCE, "im2col_phased", xp, x.dtype, size)(ph, kh, kw, sh, sw, dil[0], dil[1], oh, ow, out,
                                                               per_sample)
    elif (sh, sw) == (1, 1) and tuple(dil) == (1, 1):
        # Unit steps: LeNet-5's second layer, (64, 6, 14, 14) by 5x5 unpadded, 427 -> 184 us on one core (its weight
        # gradient makes the same patches); padded through a scratch plane, its first layer's ((32, 1, 28, 28) by
        # 5x5, padding 2) 148 -> 87 us and ResNet-18's (1, 512, 7, 7) 3x3 layers' 220 -> 120 us
        x = np.ascontiguousarray(x)
        size = x.size * kh * kw  # the count `fn` was found for: these kernels exist too
        if not any(pad):
            kernel_for(_SOURCE, "im2col_valid", xp, x.dtype, size)(x, kh, kw, oh, ow, out, per_sample)
        else:
            plane = np.zeros((x.shape[2] + pad[0] + pad[1], x.shape[3] + pad[2] + pad[3]), x.dtype)
            kernel_for(_SOURCE, "im2col_plane", xp, x.dtype, size)(x, kh, kw, pad[0], pad[2], oh, ow, out, per_sample,
                                                                   plane)
    else:
        if sh > 1 or sw > 1:
            # 3x3 stride-2 patches of ResNet-20's (32, 16, 32, 32) input: 0.91 -> 0.45 ms. Dilated stride-1 layers
            # keep the per-element loop (its short rows vectorise without the flat loop's overlap checks).
            fn = kernel_for(_SOURCE, "im2col_strided", xp, x.dtype, x.size * kh * kw)
        fn(np.ascontiguousarray(x), kh, kw, sh, sw, pad[0], pad[2], dil[0], dil[1], oh, ow, out, per_sample)
    return out if per_sample else out.reshape(rows, n * oh * ow)


def col2im_compiled(xp, cols, n, c, h, w, kh, kw, oh, ow, stride, pad, dil, out=None):
    """The (N, C, h, w) image whose patches (C*kh*kw, N*OH*OW) are `cols` summed back (into `out`, C-contiguous,
    when given), or None to use NumPy."""
    fn = kernel_for(_SOURCE, "col2im", xp, cols.dtype, cols.size)
    if fn is None:
        return None
    img = np.empty((n, c, h, w), cols.dtype) if out is None else out
    cols = np.ascontiguousarray(cols).reshape(c * kh * kw, n, oh, ow)
    if tuple(stride) == (1, 1) and tuple(dil) == (1, 1):
        # LeNet-5's second layer's input gradient, 32 samples: 243 -> 141 us on one core, the same sums
        plane = np.empty((max(oh + kh - 1, h + pad[0]), max(ow + kw - 1, w + pad[2])), cols.dtype)
        kernel_for(_SOURCE, "col2im_plane", xp, cols.dtype, cols.size)(cols, kh, kw, pad[0], pad[2], img, plane)
        return img
    fn(cols, kh, kw, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], img)
    return img
