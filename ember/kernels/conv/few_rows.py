"""The weight gradient of an image layer (few patch rows: 1-3 input channels) as one compiled kernel per thread.

Each sample's patches are made into a per-thread scratch of one sample's size, which stays in the core's cache, and
at once multiplied with the sample's output gradient as dot products of their rows, adding into the thread's
(O, C*kh*kw) total. The per-sample GEMMs in Python (conv's `im2col by batch chunks`, which serves where Numba is
missing and while this compiles) make a block of samples' patches first, 4 MB held per thread; this holds one
sample's patches and runs no Python inside a split. On 2 threads of a Zen 4 LeNet-5's first layer at batch 64 took
0.33-0.39 ms that way and 0.36-0.39 this way; on one thread the GEMMs' path is 20-25% faster (OpenBLAS's products
against these dots).
"""

from __future__ import annotations

import numpy as np

from ember.kernels import parallel
from ember.kernels.conv.patches import _SOURCE as _PATCHES_SOURCE
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for

_KERNEL_SOURCE = _PATCHES_SOURCE + '''

plane_patches, strided_patches = njit(im2col_plane), njit(im2col_strided)


@njit(inline="always")
def add_products(total, cols, gn):
    # total[o, r] += the dot product of gn[o] and cols[r] (rows of one length) for every o, r: two patch rows by four
    # channels a pass, each value loaded once for two or four sums. On one thread, against the GEMMs' path timed
    # alongside: one row by four channels 1.5-1.6x its time on LeNet-5's layer, two by two 1.2x there and 1.35x on
    # ResNet-20's stem, two by four 1.25x and 1.25-1.3x. A count that does not divide takes its last row (or channel)
    # again in the last pass and adds it once. Compiled with reassociation, so the sums vectorise
    O, R, L = gn.shape[0], cols.shape[0], cols.shape[1]
    zero = gn.dtype.type(0)
    for r in range(0, R, 2):
        r1 = min(r + 1, R - 1)
        ca, cb = cols[r], cols[r1]
        for o in range(0, O, 4):
            o1, o2, o3 = min(o + 1, O - 1), min(o + 2, O - 1), min(o + 3, O - 1)
            g0, g1, g2, g3 = gn[o], gn[o1], gn[o2], gn[o3]
            a0, a1, a2, a3, b0, b1, b2, b3 = zero, zero, zero, zero, zero, zero, zero, zero
            for i in range(L):
                u = ca[i]
                v = cb[i]
                p0 = g0[i]
                p1 = g1[i]
                p2 = g2[i]
                p3 = g3[i]
                a0 += p0 * u
                a1 += p1 * u
                a2 += p2 * u
                a3 += p3 * u
                b0 += p0 * v
                b1 += p1 * v
                b2 += p2 * v
                b3 += p3 * v
            total[o, r] += a0
            if o1 != o:
                total[o1, r] += a1
            if o2 != o1:
                total[o2, r] += a2
            if o3 != o2:
                total[o3, r] += a3
            if r1 != r:
                total[o, r1] += b0
                if o1 != o:
                    total[o1, r1] += b1
                if o2 != o1:
                    total[o2, r1] += b2
                if o3 != o2:
                    total[o3, r1] += b3


def weight_grad_unit(x, g, kh, kw, pt, pl, total, cols, plane, lo, hi):
    # total (O, R) = the sum over the samples [lo, hi) of g[n] (O, L) @ P_n^T for a stride-1 undilated layer, P_n
    # (R, L) the sample's patches made into cols (1, R, L) from plane, a zeroed padded image (see im2col_plane)
    O, L = g.shape[1], g.shape[2] * g.shape[3]
    total[:] = 0
    for n in range(lo, hi):
        plane_patches(x[n:n + 1], kh, kw, pt, pl, g.shape[2], g.shape[3], cols, True, plane)
        add_products(total, cols[0], g[n].reshape(O, L))


def weight_grad_strided(x, g, kh, kw, sh, sw, pt, pl, dh, dw, total, cols, lo, hi):
    # weight_grad_unit for any stride and dilation, the patches read with bounds tests (see im2col_strided)
    O, L = g.shape[1], g.shape[2] * g.shape[3]
    total[:] = 0
    for n in range(lo, hi):
        strided_patches(x[n:n + 1], kh, kw, sh, sw, pt, pl, dh, dw, g.shape[2], g.shape[3], cols, True)
        add_products(total, cols[0], g[n].reshape(O, L))
'''


def _unit(stride, dilation) -> bool:
    return tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)


def _kernel(dtype, unit: bool):
    """The compiled kernel for `dtype` (stride-1 undilated layers' or any layer's), or None where Numba is missing."""
    name = "weight_grad_unit" if unit else "weight_grad_strided"
    return kernel_for(_KERNEL_SOURCE, name, np, dtype, MIN_ELEMENTS, fastmath={"reassoc", "contract"})


def applies(x, g, stride, dilation) -> bool:
    """Whether this kernel can take the weight gradient of `x` and `g` here (float32 or float64, Numba)."""
    return x.dtype == g.dtype and x.shape[0] > 0 and _kernel(x.dtype, _unit(stride, dilation)) is not None


def weight_grad(x, g, kernel_hw, stride, padding, dilation) -> np.ndarray:
    """conv2d's weight gradient (O, C, kh, kw), groups 1, for `x` and output gradient `g` of one float dtype, padding
    (top, bottom, left, right); call only where applies() said yes."""
    kh, kw = kernel_hw
    n, c, h, w = x.shape
    o, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    rows = c * kh * kw
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    parts = parallel.chunks(n, compiled=True, flops=2 * o * rows * oh * ow * n)
    totals = np.empty((len(parts), o, rows), x.dtype)
    cols = parallel.workspace(len(parts) * rows * oh * ow, x.dtype).reshape(len(parts), 1, rows, oh * ow)
    pt, pb, pl, pr = padding
    if _unit(stride, dilation):
        planes = np.zeros((len(parts), h + pt + pb, w + pl + pr), x.dtype)  # borders stay zero: the padding
        parallel.run_kernel(_kernel(x.dtype, True), parts, (x, g, kh, kw, pt, pl), parted=(totals, cols, planes))
    else:
        parallel.run_kernel(_kernel(x.dtype, False), parts, (x, g, kh, kw, stride[0], stride[1], pt, pl, dilation[0],
                                                             dilation[1]), parted=(totals, cols))
    total = totals[0]
    for part in totals[1:]:
        total += part
    return total.reshape(o, c, kh, kw)
