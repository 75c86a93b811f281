"""Direct stride-1 convolution on the GEMM micro-kernel: each kernel tap is a GEMM over a shifted view of the
padded input, no patch copy and no transform.

The padded input of one sample is laid out as C planes of rows `pitch` values apart (pitch = W + the larger
side padding: a row's right padding is the next row's left padding). Output (oy, ox) is computed at position
p = oy * pitch + ox of a grid of the same pitch, so tap (kh, kw) reads plane position p + kh * pitch + kw for
every output: the taps' inputs are the same contiguous rows shifted, and out[o, p] = sum over taps and c of
w[o, c, tap] * plane[c, p + shift(tap)] is the micro-kernel's C[r, j] += A[k, r] B[k, j] with k = c, called
once per tap with B moved by the shift. The pitch's extra columns (ox >= OW) are computed and dropped.

The weight gradient is the same sum read the other way: gw[o, c, kh, kw] = sum_p g[o, p] * plane[c, p + kh *
pitch + kw]. With the padded input transposed to (position, channel), the (kw, c) pairs of one kh are
contiguous at position p + kh * pitch, so each kh is one GEMM (O, P) @ (P, KW * C) with the output gradient
read in place (its pitch columns zero).

A non-finite input value can make a weight-gradient entry NaN where the exact sum is infinite: the dropped
columns multiply it by zero (Winograd's transforms do the same).

Used for float32 3x3 layers with few channels, where it beats Winograd F(2x2, 3x3) (winograd.py): there the
Winograd transforms cost more than its fewer products save. Needs the micro-kernel (AVX-512) and Numba.
"""

from __future__ import annotations

import numpy as np

from ember.ops import batch_threads
from ember.ops.sgemm_microkernel import MR, NR, microkernel_address, transpose_address

# Layers whose input times output channels are at most this run here rather than by Winograd (2 threads, batch 32,
# forward / weight gradient in ms, direct against Winograd: 16 x 16 channels on 32 x 32 maps 0.43 / 0.45 against
# 0.80 / 1.00; 32 x 32 on 16 x 16 0.39 / 0.36 against 0.53 / 0.51; 48 x 48 on 16 x 16 0.84 / 0.84 against 0.93 /
# 0.96; but 64 x 64 on 8 x 8 0.52 / 0.43 against 0.49 / 0.37, where Winograd's 2.25 times fewer products win).
_MAX_CHANNEL_PRODUCT = 48 * 48
_MIN_CHANNELS = 8  # fewer: a tap's GEMM (K = C) is too short to repay its call
_PAD = 16  # values between planes, so planes a power of two apart do not share cache sets

SOURCE = f'''
import numpy as np
from numba import njit

from ember.ops.sgemm_intrinsics import call_microkernel, call_transpose

MR, NR = {MR}, {NR}


@njit(inline="always")
def u(i):
    # an unsigned index: Numba wraps a possibly negative one around, and that test stops the loops vectorising
    return np.uint64(i)


def forward_samples(ukr, x, wq, kw, pt, pl, pitch, out, xq, buf, lo, hi):
    # out[n] for samples lo..hi: wq (KH * KW, C, O_pad) the weight, tap-major, zero-padded to whole MR-row
    # panels; xq (C, plane) and buf (O, ldc) scratch
    N, C, H, W = x.shape
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    taps, opad = wq.shape[0], wq.shape[2]
    P = OH * pitch
    plane, ldc = xq.shape[1], buf.shape[1]
    xq[:] = 0  # the padding
    xf, of = x.reshape(-1), out.reshape(-1)
    for n in range(lo, hi):
        for c in range(C):
            src, dst = xf[(n * C + c) * H * W:], xq[c, pt * pitch + pl:]
            for y in range(H):
                for i in range(W):
                    dst[u(y * pitch + i)] = src[u(y * W + i)]
        # by column blocks of the output, all its row panels and taps at once: the block's input rows stay in L1
        for p0 in range(0, P, NR):
            width = min(NR, P - p0)
            for o0 in range(0, O, MR):
                for t in range(taps):
                    shift = (t // kw) * pitch + t % kw
                    call_microkernel(ukr, C, wq.ctypes.data + 4 * (t * C * opad + o0), opad, 1,
                                     xq.ctypes.data + 4 * (p0 + shift), plane, buf.ctypes.data + 4 * (o0 * ldc + p0),
                                     ldc, width, min(MR, O - o0), 1 if t else 0, 0)
        for o in range(O):
            src, dst = buf[o], of[(n * O + o) * OH * OW:]
            for y in range(OH):
                for i in range(OW):
                    dst[u(y * OW + i)] = src[u(y * pitch + i)]


def weight_grad_samples(ukr, tr, x, g, kh_len, kw, pt, pl, pitch, xt, gq, total, lo, hi):
    # total[o, kh * KW * C + kw * C + c] = sum over samples lo..hi and positions p of g[n, o, p] x[n, c, p + shift]:
    # xt (plane, C) the padded input transposed, gq (O_pad, ldg) the output gradient on the pitched grid (its
    # extra columns and rows zero)
    N, C, H, W = x.shape
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    P = OH * pitch
    ldg, ldc = gq.shape[1], total.shape[1]
    cols = kw * C
    xt[:] = 0
    gq[:] = 0
    xf, gf, xtf = x.reshape(-1), g.reshape(-1), xt.reshape(-1)
    for n in range(lo, hi):
        # by 16 x 16 blocks through the transposing copy, the channels and columns past them one by one
        c_full = C // 16 * 16 if tr else 0
        i_full = W // 16 * 16 if c_full else 0
        for c0 in range(0, c_full, 16):
            for y in range(H):
                for i0 in range(0, i_full, 16):
                    call_transpose(tr, x.ctypes.data + 4 * (((n * C + c0) * H + y) * W + i0), H * W,
                                   xt.ctypes.data + 4 * (((y + pt) * pitch + pl + i0) * C + c0), C)
        for c in range(C):
            src, dst = xf[(n * C + c) * H * W:], xtf[(pt * pitch + pl) * C + c:]
            for y in range(H):
                for i in range(0 if c >= c_full else i_full, W):
                    dst[u((y * pitch + i) * C)] = src[u(y * W + i)]
        for o in range(O):
            src, dst = gf[(n * O + o) * OH * OW:], gq[o]
            for y in range(OH):
                for i in range(OW):
                    dst[u(y * pitch + i)] = src[u(y * OW + i)]
        for kh in range(kh_len):
            for o0 in range(0, O, MR):
                for j0 in range(0, cols, NR):
                    call_microkernel(ukr, P, gq.ctypes.data + 4 * o0 * ldg, 1, ldg,
                                     xt.ctypes.data + 4 * (kh * pitch * C + j0), C,
                                     total.ctypes.data + 4 * (o0 * ldc + kh * cols + j0), ldc, min(NR, cols - j0),
                                     min(MR, O - o0), 1 if n > lo else 0, 0)
'''


def _round(values: int) -> int:
    """`values` rounded up to a whole cache line, plus one (see _PAD)."""
    return -(-values // 16) * 16 + _PAD


def _geometry(h, w, kh, kw, padding):
    """(oh, ow, pitch, plane): the output size, the row pitch and the padded plane's length (with room for the
    last rows' shifted reads)."""
    pt, pb, pl, pr = padding
    oh, ow = h + pt + pb - kh + 1, w + pl + pr - kw + 1
    pitch = w + max(pl, pr)
    return oh, ow, pitch, _round((oh + kh) * pitch + kw)


def applies(x_shape, w_shape, dtype, stride, padding, dilation, groups) -> bool:
    """Whether conv2d of these shapes runs here: float32, stride 1, undilated, ungrouped, 3x3, padding under
    the kernel's size, at least 8 channels each way and few enough in all (see _MAX_CHANNEL_PRODUCT), on a CPU
    with the micro-kernel and Numba."""
    if dtype != np.float32 or groups != 1 or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1):
        return False
    o, c, kh, kw = w_shape
    if (kh, kw) != (3, 3) or min(c, o) < _MIN_CHANNELS or c * o > _MAX_CHANNEL_PRODUCT:
        return False
    pt, pb, pl, pr = padding
    if min(padding) < 0 or max(pt, pb) >= kh or max(pl, pr) >= kw:
        return False
    return _kernels() is not None


def _kernels():
    """The compiled (forward, weight gradient) pair, or None where Numba or the micro-kernel is missing."""
    if "pair" not in _state:
        from ember.graph.codegen import get_backend
        from ember.ops.compiled import compile_source

        if get_backend() == "numpy" or not microkernel_address():
            return None
        forward = compile_source(SOURCE, "forward_samples")
        _state["pair"] = None if forward is None else (forward, compile_source(SOURCE, "weight_grad_samples"))
    return _state["pair"]


_state: dict = {}


def conv2d(x: np.ndarray, w: np.ndarray, padding) -> np.ndarray:
    """conv2d of float32 NCHW `x` by (O, C, KH, KW) `w`, stride 1, padding (top, bottom, left, right); call only
    where applies() said yes."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow, pitch, plane = _geometry(h, wd, kh, kw, padding)
    opad = -(-o // MR) * MR
    wq = np.zeros((kh * kw, c, opad), np.float32)
    wq[:, :, :o] = w.reshape(o, c, kh * kw).transpose(2, 1, 0)
    x = np.ascontiguousarray(x)
    out = np.empty((n, o, oh, ow), np.float32)
    ldc = _round(oh * pitch)
    forward = _kernels()[0]
    ukr = microkernel_address()

    def chunk(a, b):
        work = batch_threads.workspace(c * plane + o * ldc, np.float32)
        xq, buf = work[: c * plane].reshape(c, plane), work[c * plane:].reshape(o, ldc)
        forward(ukr, x, wq, kw, padding[0], padding[2], pitch, out, xq, buf, a, b)

    batch_threads.run(chunk, n, 2.0 * w.size * n * oh * ow)
    return out


def weight_grad(x: np.ndarray, g: np.ndarray, padding, kernel_hw) -> np.ndarray:
    """conv2d's weight gradient, (O, C, KH, KW), for float32 input `x` and output gradient `g` (stride 1); call
    only where applies() said yes."""
    n, c, h, wd = x.shape
    o = g.shape[1]
    kh, kw = kernel_hw
    oh, ow, pitch, plane = _geometry(h, wd, kh, kw, padding)
    opad = -(-o // MR) * MR
    ldg = _round(oh * pitch)
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    weight_grad_samples = _kernels()[1]
    ukr = microkernel_address()

    def chunk(a, b):
        work = batch_threads.workspace(plane * c + opad * ldg, np.float32)
        xt, gq = work[: plane * c].reshape(plane, c), work[plane * c:].reshape(opad, ldg)
        total = np.empty((o, kh * kw * c), np.float32) if b > a else np.zeros((o, kh * kw * c), np.float32)
        weight_grad_samples(ukr, transpose_address(), x, g, kh, kw, padding[0], padding[2], pitch, xt, gq, total, a, b)
        return total

    parts = batch_threads.run(chunk, n, 2.0 * o * c * kh * kw * n * oh * ow)
    total = parts[0]
    for part in parts[1:]:
        total += part
    return np.ascontiguousarray(total.reshape(o, kh, kw, c).transpose(0, 3, 1, 2))
