"""A single sample's convolution by blocks of output rows, each thread's rows compiled whole (Numba).

Each thread takes a band of the output's rows and, a block of rows at a time, copies the block's patches into its
scratch (im2col restricted to those rows) and multiplies the weight by them on Ember's GEMM driver straight into the
output. The patches of a block stay in the core's cache between the copy and the product, instead of a whole
image's patches (ResNet-18's 7x7 stem: 7.4 MB) going out to memory and back, and the split runs no Python, so its
helper thread never waits for the GIL (parallel.run_kernel). Used by conv2d for float32 samples one at a time
whose output rows conv._rows_pay splits, and in the same way for its split by channel halves
(conv._forward_by_channel_halves), where Ember's GEMM driver runs (gemm.driver_enabled()). The values are the
Python paths' where those multiply on the driver too (gemm.enabled()): each output is the driver's in-order sum
over the same patch rows; where NumPy's BLAS runs their products, they differ from them by float32 rounding. The driver is called through
its C entry point (sgemm.driver_address), so these kernels compile without it.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import gemm, parallel, sgemm
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for
from ember.kernels.sgemm_microkernel import microkernel_address, transpose_address

_SOURCE = '''
import numpy as np
from numba import njit

from ember.kernels.sgemm_intrinsics import call_driver


@njit(inline="always")
def _rows_u(i):
    # an unsigned index: Numba wraps a possibly negative one around, and that test stops the loops vectorising
    return np.uint64(i)


@njit(inline="always")
def _patch_rows(xf, c0, c1, H, W, kh, kw, sh, sw, pt, pl, dh, dw, ow, y0, y1, cf):
    # cf[(((c - c0)*kh + i)*kw + j)*L + (y - y0)*ow + xx] = x[c, y*sh - pt + i*dh, xx*sw - pl + j*dw] (0 outside x)
    # for the channels [c0, c1) and output rows [y0, y1), L = (y1 - y0)*ow; each tap's in-bounds columns [lo, hi)
    # found once
    L = (y1 - y0) * ow
    for c in range(c0, c1):
        for i in range(kh):
            for j in range(kw):
                d0 = (((c - c0) * kh + i) * kw + j) * L
                off = j * dw - pl  # output column xx reads input column xx*sw + off
                lo = 0 if off >= 0 else min(ow, (sw - 1 - off) // sw)
                hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if off <= W - 1 else lo
                for y in range(y0, y1):
                    iy = y * sh - pt + i * dh
                    d = d0 + (y - y0) * ow
                    if iy < 0 or iy >= H:
                        for xx in range(ow):
                            cf[_rows_u(d + xx)] = 0
                        continue
                    for xx in range(lo):
                        cf[_rows_u(d + xx)] = 0
                    src = (c * H + iy) * W + off
                    if sw == 1:  # a unit step known when compiling: the copy vectorises
                        for xx in range(lo, hi):
                            cf[_rows_u(d + xx)] = xf[_rows_u(src + xx)]
                    elif sw == 2:
                        for xx in range(lo, hi):
                            cf[_rows_u(d + xx)] = xf[_rows_u(src + 2 * xx)]
                    else:
                        for xx in range(lo, hi):
                            cf[_rows_u(d + xx)] = xf[_rows_u(src + xx * sw)]
                    for xx in range(hi, ow):
                        cf[_rows_u(d + xx)] = 0


def conv_output_rows(drv, ukr, tr, x, w, kh, kw, sh, sw, pt, pl, dh, dw, out, rows_per_block, cols, lo, hi):
    # out[:, y, :] for output rows [lo, hi) of sample x (C, H, W), w the (O, C*kh*kw) weight, out (O, OH, OW); blocks
    # of at most rows_per_block rows: their patches into cols, then w @ patches on the GEMM driver (drv, ukr, tr: its
    # entry point's, micro-kernel's and transposing copy's addresses) into the block's columns of out
    C, H, W = x.shape
    O, OH, OW = out.shape
    K = w.shape[1]
    xf = x.reshape(-1)
    blocks = (hi - lo + rows_per_block - 1) // rows_per_block
    for blk in range(blocks):
        y0 = lo + (hi - lo) * blk // blocks
        y1 = lo + (hi - lo) * (blk + 1) // blocks
        L = (y1 - y0) * OW
        _patch_rows(xf, 0, C, H, W, kh, kw, sh, sw, pt, pl, dh, dw, OW, y0, y1, cols)
        call_driver(drv, ukr, tr, w.ctypes.data, 0, K, 1, cols.ctypes.data, 0, L, 1, out.ctypes.data + 4 * y0 * OW, 0,
                    OH * OW, K, 0, 0, 0, 1, 0, O, 0, L)


def conv_channel_halves(drv, ukr, tr, x, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, partial, cols, lo, hi):
    # partial[k] = w's columns for half k's channels @ their patches, for the halves [lo, hi) of sample x's channels
    # (half 0: [0, C // 2), half 1: [C // 2, C)); partial (2, O, oh*ow), w (O, C*kh*kw)
    C, H, W = x.shape
    O, L = partial.shape[1], partial.shape[2]
    K = w.shape[1]
    xf = x.reshape(-1)
    for k in range(lo, hi):
        c0 = 0 if k == 0 else C // 2
        c1 = C // 2 if k == 0 else C
        _patch_rows(xf, c0, c1, H, W, kh, kw, sh, sw, pt, pl, dh, dw, ow, 0, oh, cols)
        call_driver(drv, ukr, tr, w.ctypes.data + 4 * c0 * kh * kw, 0, K, 1, cols.ctypes.data, 0, L, 1,
                    partial.ctypes.data + 4 * k * O * L, 0, L, (c1 - c0) * kh * kw, 0, 0, 0, 1, 0, O, 0, L)
'''

# Patches per block, kept in the core's cache between im2col and the product: ResNet-18's (1, 64, 56, 56) by 3x3
# stride 2 took 433, 400, 382-398 and 385 us with 256 KB, 512 KB, 1 MB and 2 MB blocks, its 7x7 stem 865-896 us up
# to 512 KB and 812-848 from 1 MB (2026-11-27).
_BLOCK_BYTES = 1 << 20


def _kernel(name: str = "conv_output_rows"):
    """Kernel `name` of this module compiled, where Ember's GEMM driver runs here (gemm.driver_enabled()), else None."""
    if not gemm.driver_enabled() or not sgemm.driver_address():
        return None
    return kernel_for(_SOURCE, name, np, np.float32, MIN_ELEMENTS)


def available() -> bool:
    """Whether forward() and forward_by_channel_halves() run here (Numba, Ember's GEMM)."""
    return _kernel() is not None


def forward(x: np.ndarray, w: np.ndarray, stride, padding, dilation, oh: int, ow: int) -> np.ndarray:
    """conv2d of one float32 sample x (1, C, H, W) by w (O, C, kh, kw), groups 1, its output rows split over the
    threads; call only where available()."""
    o, c, kh, kw = w.shape
    k = c * kh * kw
    out = np.empty((1, o, oh, ow), np.float32)
    parts = parallel.chunks(oh, compiled=True, flops=2.0 * w.size * oh * ow)
    rows = max(1, min(-(-oh // len(parts)), _BLOCK_BYTES // (4 * k * ow)))
    cols = parallel.workspace(len(parts) * k * rows * ow, np.float32).reshape(len(parts), -1)
    parallel.run_kernel(_kernel(), parts, (sgemm.driver_address(), microkernel_address(),
                                                transpose_address(), np.ascontiguousarray(x[0]),
                                                np.ascontiguousarray(w.reshape(o, k)), kh, kw, stride[0], stride[1],
                                                padding[0], padding[2], dilation[0], dilation[1], out[0], rows),
                             parted=(cols,))
    return out


def forward_by_channel_halves(x: np.ndarray, w: np.ndarray, stride, padding, dilation, oh: int, ow: int) -> np.ndarray:
    """conv2d of one float32 sample as the sum of two convolutions over halves of its input channels, a thread each
    (conv._forward_by_channel_halves' algorithm and values, compiled whole); call only where available()."""
    o, c, kh, kw = w.shape
    partial = np.empty((2, o, oh * ow), np.float32)
    parts = parallel.chunks(2)
    cols = parallel.workspace(len(parts) * (c - c // 2) * kh * kw * oh * ow, np.float32).reshape(len(parts), -1)
    parallel.run_kernel(_kernel("conv_channel_halves"), parts,
                             (sgemm.driver_address(), microkernel_address(), transpose_address(),
                              np.ascontiguousarray(x[0]),
                              np.ascontiguousarray(w.reshape(o, -1)), kh, kw, stride[0], stride[1], padding[0],
                              padding[2], dilation[0], dilation[1], oh, ow, partial), parted=(cols,))
    return np.add(partial[0], partial[1], out=partial[0]).reshape(1, o, oh, ow)
