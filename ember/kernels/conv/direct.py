"""Direct convolution on the GEMM micro-kernel: each kernel tap is a GEMM over a shifted view of the padded
input, no patch copy and no transform.

The padded input of one sample is laid out as C planes of rows `pitch` values apart (pitch = W + the larger
side padding: a row's right padding is the next row's left padding). Output (oy, ox) is computed at position
p = oy * pitch + ox of a grid of the same pitch, so tap (kh, kw) reads plane position p + kh * pitch + kw for
every output: the taps' inputs are the same contiguous rows shifted, and out[o, p] = sum over taps and c of
w[o, c, tap] * plane[c, p + shift(tap)] is the micro-kernel's C[r, j] += A[k, r] B[k, j] with k = c, once per
tap with B moved by the shift: one call of the kernel's taps variant, which keeps the block in registers across
the taps. The pitch's extra columns (ox >= OW) are computed and dropped. On small
maps the roles swap (rows: MR positions, columns: output channels) where that masks fewer lanes, and the block is
transposed back.

Stride 2 runs on the input's four stride phases: phase (a, b) holds the padded input's rows a, a + 2, ... and
columns b, b + 2, ..., so tap (kh, kw) reads phase (kh % 2, kw % 2) at shift (kh // 2) * pitch + kw // 2, a
stride-1 read again. A stride-2 layer's input gradient (conv_transpose2d) is four stride-1 convolutions of the
output gradient, one per phase of the input it writes (input_grad_stride2).

The weight gradient is the same sum read the other way: gw[o, c, kh, kw] = sum_p g[o, p] * plane[c, p + kh *
pitch + kw]. With the padded input transposed to (position, channel), the (kw, c) pairs of one kh (and phase)
are contiguous at position p + kh * pitch, so each is one GEMM (O, P) @ (P, KW * C) with the output gradient
read in place (its pitch columns zero), on the wider block (8 x 48 for AVX-512) where that masks fewer lanes.

A non-finite input value can make a weight-gradient entry NaN where the exact sum is infinite: the dropped
columns multiply it by zero (Winograd's transforms do the same).

With fewer than 8 input channels a tap's K would be too short, so the forward folds the kernel's columns into it
(fill_shifted): each channel's plane is copied once per kernel column, shifted by it, and a tap is a kernel row,
K = C * KW.

The forward is three compiled kernels and the weight gradient two (_Kernels: stride 1, stride 2 on the phases,
and positions as rows for small maps), each compiled where first called, so that a model compiles only the paths
its layers take: LeNet-5, all stride 1, compiles its pair in 1.8 s of CPU on an empty kernel cache, where one forward
and one weight gradient holding every path took 3.0-3.1 s (one process, AMD EPYC family 25 model 17). Every forward
variant takes the same arguments, as do both weight gradients, so that they share the pool's chunk entry points.

Used for float32 3x3 and 5x5 layers with few channels: there it beats Winograd F(2x2, 3x3) (winograd.py), whose
transforms cost more than its fewer products save, and im2col, whose patch copies cost more than the products.
Needs the micro-kernel (AVX-512 or AVX2: sgemm_microkernel.BLOCK) and Numba.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ember.kernels import background, parallel
from ember.kernels.numba_loader import compiled_allowed
from ember.kernels.sgemm_microkernel import (
    AVX512,
    BLOCK,
    MR,
    NR,
    WIDE_NR,
    deinterleave_address,
    microkernel_address,
    taps_microkernel_address,
    transpose_address,
    wide_microkernel_address,
)

# Layers whose input times output channels are at most this run here rather than by Winograd (2 threads, batch 32,
# forward / weight gradient in ms, direct against Winograd: 16 x 16 channels on 32 x 32 maps 0.43 / 0.45 against
# 0.80 / 1.00; 32 x 32 on 16 x 16 0.39 / 0.36 against 0.53 / 0.51; 48 x 48 on 32 x 32 3.45 / 3.07 against 3.41 /
# 3.92). Forwards with up to _MAX_CHANNEL_PRODUCT_SMALL_MAP on maps of at most _SMALL_MAP outputs too (64 x 64 on
# 8 x 8: 0.41 against 0.50), where the positions fill the micro-kernel's rows; their weight gradients stay with
# Winograd (0.43 against 0.40), as do 64 x 64 layers on 16 x 16 maps (1.39 / 1.38 against 1.37 / 1.30) and
# larger ones (128 x 128 on 8 x 8: 1.44 / 1.59 against 1.21 / 1.09), where its 2.25 times fewer products win.
_MAX_CHANNEL_PRODUCT = 48 * 48
# AVX2's 4 x 24 block has no such edge: the positions of an 8 x 8 map fill its rows no better than 72 pitched ones
# fill its columns, and Winograd won there (one thread, CPU time, AMD EPYC Zen 3: 64 x 64 on 8 x 8, direct 2.17
# against Winograd 1.62 ms).
_MAX_CHANNEL_PRODUCT_SMALL_MAP = 64 * 64 if BLOCK is AVX512 else _MAX_CHANNEL_PRODUCT
# On AVX2's block a stride-2 weight gradient with more channel pairs than this runs slower than im2col's GEMMs
# (AMD EPYC Zen 3, ResNet-20's 32 -> 64 layer on 16 x 16 maps: one thread, CPU time, 2.21 against 1.72 ms; two
# threads 1.63 against 1.36); its 16 -> 32 layer on 32 x 32 maps is even (2.35 / 2.20; 1.79 / 1.89).
_MAX_STRIDE2_WGRAD_CHANNEL_PRODUCT = _MAX_CHANNEL_PRODUCT if BLOCK is AVX512 else 16 * 32
_SMALL_MAP = 64
_KERNELS = ((3, 3), (5, 5))
_MIN_CHANNELS = 8  # input channels; fewer: a tap's GEMM (K = C) is too short to repay its call
# Output channels, the micro-kernel's 8-row panels: 3 to 7 fill enough of one (2 threads, in ms, direct against
# im2col and col2im: ResNet-20's stem's input gradient, 16 -> 3 channels on 32 x 32, 0.24 / 0.26; LeNet-5's
# second layer's, 16 -> 6 on 14 x 14 5x5, 0.26 / 0.27, 0.31 / 0.38 in a process where memory ran slow), 2 do not
# (16 -> 2 on 16 x 16, 0.11 / 0.09). Weight gradients whatever the input channels, whose K is the positions:
# LeNet-5's second layer 0.20 against 0.36 ms, its first (1 channel) 0.31 / 0.34, ResNet-20's stem 0.28 / 0.30.
_MIN_OUT_CHANNELS = 3
# With fewer input channels the forward folds the kernel's columns into K (K = C * KW, a GEMM per kernel row),
# which beat im2col with up to 16 output channels (2 threads, in ms, folded against im2col and PyTorch: LeNet-5's
# (64, 6, 14, 14) x 16 5x5 0.21 / 0.26 / 0.11, ResNet-20's (32, 3, 32, 32) x 16 3x3 0.18 / 0.25 / 0.20,
# (8, 3, 112, 112) x 16 3x3 0.50 / 0.78 / 0.43) and up to 64 where K is at least 24 ((16, 6, 28, 28) x 64 5x5 0.71
# / 0.82 / 0.57); with more, or a shorter K, each call's few products no longer repay its loads and stores of the
# output block ((8, 3, 64, 64) x 32 3x3 0.59 / 0.39, (16, 6, 28, 28) x 128 5x5 1.61 / 1.41).
_FOLD_MAX_OUT_CHANNELS = 16
_FOLD_LONG_K = 24
_FOLD_MAX_OUT_CHANNELS_LONG_K = 64
_FOLD_MAX_KERNEL = 7
# O * H * (W + KW), about a sample's pitched output block, which must stay in cache until it is copied out
_FOLD_MAX_OUTPUT_VALUES = 1 << 20
_PAD = 16  # values between planes, so planes a power of two apart do not share cache sets

SOURCE = f'''
import numpy as np
from numba import njit

from ember.kernels.sgemm_intrinsics import call_deinterleave, call_microkernel, call_microkernel_taps, call_transpose

MR, NR = {MR}, {NR}


@njit(inline="always")
def u(i):
    # an unsigned index: Numba wraps a possibly negative one around, and that test stops the loops vectorising
    return np.uint64(i)


@njit(inline="always")
def fill_phases(x, n, pt, pl, pitch, xq, split):
    # stride 2: sample n of x into its stride phases' padded planes, xq (4, C, plane): input (y, i) at padded
    # (y + pt, i + pl) goes to phase (a, b) = ((y + pt) % 2, (i + pl) % 2), row (y + pt) // 2, column (i + pl) // 2,
    # each row's even and odd columns split by the compiled pair split; the padding positions left as they are
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    xf = x.reshape(-1)
    plane = xq.shape[2]
    for c in range(C):
        for y in range(H):
            a, row = (y + pt) % 2, (y + pt) // 2
            # column 2m lands at pl // 2 + m of phase (a, pl % 2), column 2m + 1 at (pl + 1) // 2 + m of the other
            even = ((a * 2 + pl % 2) * C + c) * plane + row * pitch + pl // 2
            odd = ((a * 2 + (pl + 1) % 2) * C + c) * plane + row * pitch + (pl + 1) // 2
            src = (n * C + c) * H * W + y * W
            call_deinterleave(split, x.ctypes.data + 4 * src, W // 2, xq.ctypes.data + 4 * even,
                              xq.ctypes.data + 4 * odd)
            if W % 2:
                xq.reshape(-1)[even + W // 2] = xf[src + W - 1]


@njit(inline="always")
def fill_shifted(x, n, pt, pl, pitch, fold, xq):
    # stride 1: sample n of x into its padded planes xq (1, C * fold, plane), input (y, i) at (y + pt, i + pl), row
    # by row: contiguous copies, which vectorise; the padding positions are left as they are (zero). With the
    # kernel's columns folded into K (fold > 1), fold copies of each padded plane: copy k of channel c (xq[0, c *
    # fold + k]) moved k values left of copy 0 (which starts fold - 1 values into its plane, so none starts before
    # it): a read at q + fold - 1 sees the padded plane at q + k. Copy 0 is filled row by row, the others are one
    # contiguous copy of it each (its padding included)
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    plane = xq.shape[2]
    xf = x.reshape(-1)
    for c in range(C):
        src, first = xf[(n * C + c) * H * W:], xq[0, c * fold]
        dst = first[pt * pitch + pl + fold - 1:]
        for y in range(H):
            for i in range(W):
                dst[u(y * pitch + i)] = src[u(y * W + i)]
        for k in range(1, fold):
            shifted = xq[0, c * fold + k]
            for q in range(plane - k):
                shifted[u(q)] = first[u(q + k)]


@njit(inline="always")
def transpose_plane(x, n, pt, pl, pitch, xt, tr):
    # stride 1: sample n of x straight into its transposed padded plane xt[0] (plane, C), by 16 x 16 blocks
    # through the transposing copy, the channels and columns past them one by one; the padding left as it is
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    xf, xtf = x.reshape(-1), xt.reshape(-1)
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


@njit(inline="always")
def transpose_phases(xq, xt, s, tr):
    # the phase planes xq (s * s, C, plane) into xt (s * s, plane, C), by 16 x 16 blocks as above
    C, plane = xq.shape[1], xq.shape[2]
    c_full = C // 16 * 16 if tr else 0
    for ph in range(s * s):
        for c0 in range(0, c_full, 16):
            for q0 in range(0, plane, 16):
                call_transpose(tr, xq.ctypes.data + 4 * ((ph * C + c0) * plane + q0), plane,
                               xt.ctypes.data + 4 * ((ph * plane + q0) * C + c0), C)
        for c in range(c_full, C):
            for q in range(plane):
                xt[ph, q, c] = xq[ph, c, q]


@njit(inline="always")
def pitched_products(ukr, nr, wq, xq, buf, O, P, woff, xoff):
    # buf[o, p] for every output channel and pitched position: by column blocks of the output, all its row panels
    # and taps at once, so that the block's input rows stay in L1; wq by MR-row panels (_panels)
    C, plane, ldc, taps = xq.shape[1], xq.shape[2], buf.shape[1], woff.shape[0]
    wo, xo = woff.ctypes.data, xoff.ctypes.data
    for p0 in range(0, P, nr):
        width = min(nr, P - p0)
        for o0 in range(0, O, MR):
            call_microkernel_taps(ukr, C, wq.ctypes.data + 4 * o0 * taps * C, MR, 1, xq.ctypes.data + 4 * p0, plane,
                                  buf.ctypes.data + 4 * (o0 * ldc + p0), ldc, width, min(MR, O - o0), 0, 0, taps,
                                  wo, xo)


@njit(inline="always")
def rows_out(buf, out, n, place, pitch):
    # sample n's pitched rows buf (O, ldc) into out[n] at place = (OH, OW, 1, y0, x0), dropping the pitch columns:
    # contiguous rows, which vectorise (a stride known only at run time does not: forward_phases' step 2)
    O, HO, WO = out.shape[1], out.shape[2], out.shape[3]
    OH, OW, y0, x0 = place[0], place[1], place[3], place[4]
    of = out.reshape(-1)
    for o in range(O):
        src, dst = buf[o], of[(n * O + o) * HO * WO + y0 * WO + x0:]
        for y in range(OH):
            for i in range(OW):
                dst[u(y * WO + i)] = src[u(y * pitch + i)]


def forward_stride1(ukr, nr, tr, split, x, wq, woff, xoff, s, fold, pt, pl, pitch, out, place, xq, buf, bt, lo,
                    hi):
    # ukr: the micro-kernel with the taps loop (all of a block's taps in one call), nr its width.
    # The (OH, OW) outputs of samples lo..hi of a stride-1 layer (place = (OH, OW, 1, 0, 0)), the micro-kernel's
    # columns pitched positions: wq the weight zero-padded to whole MR-row panels, by panel (_panels); tap t reads
    # wq at woff[t] and the planes at xoff[t] (in values: _tap_offsets); xq (1, C, plane) and buf (O, ldc)
    # scratch. With fold > 1 (few channels) xq holds fold shifted copies of each plane (fill_shifted) and a tap is a
    # kernel row, K = C * fold. Every forward variant takes these arguments, so that they share the pool's entry
    # points; s and bt are unused here
    O, P = out.shape[1], place[0] * pitch
    xq[:] = 0  # the padding
    for n in range(lo, hi):
        fill_shifted(x, n, pt, pl, pitch, fold, xq)
        pitched_products(ukr, nr, wq, xq, buf, O, P, woff, xoff)
        rows_out(buf, out, n, place, pitch)


def forward_phases(ukr, nr, tr, split, x, wq, woff, xoff, s, fold, pt, pl, pitch, out, place, xq, buf, bt, lo,
                   hi):
    # forward_stride1's outputs for stride s = 2, on the input's phase planes xq (4, C, plane), or (s = 1) a stride-2
    # input gradient's phase: output (y, i) to out[n, :, y0 + step * y, x0 + step * i] for place = (OH, OW, step,
    # y0, x0); fold and bt unused
    O, OH, OW, step, y0, x0 = out.shape[1], place[0], place[1], place[2], place[3], place[4]
    HO, WO = out.shape[2], out.shape[3]
    xq[:] = 0  # the padding
    of = out.reshape(-1)
    for n in range(lo, hi):
        if s == 1:
            fill_shifted(x, n, pt, pl, pitch, 1, xq)
        else:
            fill_phases(x, n, pt, pl, pitch, xq, split)
        pitched_products(ukr, nr, wq, xq, buf, O, OH * pitch, woff, xoff)
        if step == 1:
            rows_out(buf, out, n, place, pitch)
            continue
        for o in range(O):
            src, dst = buf[o], of[(n * O + o) * HO * WO + y0 * WO + x0:]
            for y in range(OH):
                for i in range(OW):
                    dst[u(step * (y * WO + i))] = src[u(y * pitch + i)]


def forward_by_position(ukr, nr, tr, split, x, wq, woff, xoff, s, fold, pt, pl, pitch, out, place, xq, buf, bt,
                        lo, hi):
    # forward_stride1's or forward_phases' outputs (step 1) with the micro-kernel's rows positions and its columns
    # channels (a small map: an 8 x 8 output's rows are 8 blocks of 8 positions, where its 72 pitched positions
    # filled 96 columns of 32): wq (taps, C, O_pad), bt (OH * OW, O) scratch; buf unused
    C = xq.shape[1]
    O, OH, OW = out.shape[1], place[0], place[1]
    opad, plane, ldt = wq.shape[-1], xq.shape[2], bt.shape[1]
    xq[:] = 0  # the padding
    of = out.reshape(-1)
    wa, xa, wo, xo = wq.ctypes.data, xq.ctypes.data, woff.ctypes.data, xoff.ctypes.data
    taps, Q = woff.shape[0], OH * OW
    full = Q // 16 * 16
    for n in range(lo, hi):
        if s == 1:
            fill_shifted(x, n, pt, pl, pitch, fold, xq)
        else:
            fill_phases(x, n, pt, pl, pitch, xq, split)
        # each output row in blocks of MR positions (no pitch columns computed), into bt's compact rows
        for y in range(OH):
            for i0 in range(0, OW, MR):
                p, q = y * pitch + i0, y * OW + i0
                for o0 in range(0, O, nr):
                    call_microkernel_taps(ukr, C, xa + 4 * p, plane, 1, wa + 4 * o0, opad,
                                          bt.ctypes.data + 4 * (q * ldt + o0), ldt, min(nr, O - o0),
                                          min(MR, OW - i0), 0, 0, taps, xo, wo)
        # (positions, O) to out[n] (O, positions) by 16 x 16 blocks, the positions past them one by one
        for q0 in range(0, full, 16):
            for o0 in range(0, O, 16):
                call_transpose(tr, bt.ctypes.data + 4 * (q0 * ldt + o0), ldt,
                               out.ctypes.data + 4 * ((n * O + o0) * Q + q0), Q)
        for o in range(O):
            for q in range(full, Q):
                of[(n * O + o) * Q + q] = bt[q, o]


@njit(inline="always")
def weight_grad_products(ukr, nr, g, n, kh_len, kw_len, s, pitch, xt, gq, total, first):
    # sample n's share of total[o, kh * KW * C + k * C + c] (added unless `first`), from the transposed phase
    # planes xt (s * s, plane, C): gq (O_pad, ldg) takes the output gradient on the pitched grid (its extra
    # columns and rows stay zero)
    C, plane, ldg, ldc = xt.shape[2], xt.shape[1], gq.shape[1], total.shape[1]
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    P = OH * pitch
    gf = g.reshape(-1)
    for o in range(O):
        src, dst = gf[(n * O + o) * OH * OW:], gq[o]
        for y in range(OH):
            for i in range(OW):
                dst[u(y * pitch + i)] = src[u(y * OW + i)]
    for kh in range(kh_len):
        a, dh = kh % s, kh // s
        col = kh * kw_len * C
        for b in range(s):
            # this phase's taps (kw = b, b + s, ...) read it at shifts dh * pitch + 0, 1, ...: their (kw, c)
            # columns are contiguous in xt
            cols = (kw_len - b + s - 1) // s * C
            for o0 in range(0, O, MR):
                for j0 in range(0, cols, nr):
                    call_microkernel(ukr, P, gq.ctypes.data + 4 * o0 * ldg, 1, ldg,
                                     xt.ctypes.data + 4 * (((a * s + b) * plane + dh * pitch) * C + j0), C,
                                     total.ctypes.data + 4 * (o0 * ldc + col + j0), ldc, min(nr, cols - j0),
                                     min(MR, O - o0), 0 if first else 1, 0)
            col += cols


def weight_grad_stride1(ukr, nr, tr, split, x, g, kh_len, kw_len, s, pt, pl, pitch, xq, xt, gq, total, lo, hi):
    # total[o, kh * KW * C + kw * C + c] = sum over samples lo..hi and positions p of g[n, o, p] times the input
    # under tap (kh, kw), stride 1: each sample straight into its transposed padded plane xt (1, plane, C); xq
    # unused (weight_grad_stride2's arguments, so that both share the pool's entry points)
    xt[:] = 0
    gq[:] = 0
    for n in range(lo, hi):
        transpose_plane(x, n, pt, pl, pitch, xt, tr)
        weight_grad_products(ukr, nr, g, n, kh_len, kw_len, 1, pitch, xt, gq, total, n == lo)


def weight_grad_stride2(ukr, nr, tr, split, x, g, kh_len, kw_len, s, pt, pl, pitch, xq, xt, gq, total, lo, hi):
    # weight_grad_stride1's sum for stride s = 2, the kw of each kh in phase order (those with kw % s == 0 first):
    # xq (s * s, C, plane) the phase planes, xt (s * s, plane, C) the same transposed
    xq[:] = 0
    xt[:] = 0
    gq[:] = 0
    for n in range(lo, hi):
        fill_phases(x, n, pt, pl, pitch, xq, split)
        transpose_phases(xq, xt, s, tr)
        weight_grad_products(ukr, nr, g, n, kh_len, kw_len, s, pitch, xt, gq, total, n == lo)
'''


def _round(values: int) -> int:
    """`values` rounded up to a whole cache line, plus one (see _PAD)."""
    return -(-values // 16) * 16 + _PAD


def _geometry(h, w, kh, kw, stride, padding):
    """(oh, ow, pitch, plane): the output size, the phase planes' row pitch and length (with room for the last
    rows' shifted reads and the dropped columns' reads past them)."""
    pt, pb, pl, pr = padding
    oh, ow = (h + pt + pb - kh) // stride + 1, (w + pl + pr - kw) // stride + 1
    if stride == 1:
        pitch = w + max(pl, pr)  # a row's right padding is the next row's left padding
    else:  # every column a tap reads, and every input column, within one row of each phase
        pitch = max(ow + (kw - 1) // stride, (w - 1 + pl) // stride + 1)
    rows = max(oh + (kh - 1) // stride, (h - 1 + pt) // stride + 1) + 1
    return oh, ow, pitch, _round(rows * pitch + kw)


def _microkernel(*columns: int):
    """(address, width) of the micro-kernel that covers products of these column counts with the fewest masked
    lanes, the wider on a tie (it broadcasts the same A values for three B vectors instead of two)."""
    return min(((wide_microkernel_address(), WIDE_NR), (microkernel_address(), NR)),
               key=lambda k: sum(-(-cols // k[1]) * k[1] for cols in columns))


def _by_position(oh: int, ow: int, pitch: int, channels: int) -> bool:
    """Whether the forward's micro-kernel rows should be positions (each output row's, in blocks of MR) and its
    columns output channels: where that masks fewer lanes than pitched positions as columns (small maps), and
    the channels fill whole 16 x 16 blocks of the transposing copy back."""
    if channels % 16:
        return False
    columns, rows = _microkernel(oh * pitch)[1], _microkernel(channels)[1]  # the two ways' kernel widths
    by_channel = -(-oh * pitch // columns) * columns * -(-channels // MR) * MR
    by_position = oh * -(-ow // MR) * MR * -(-channels // rows) * rows
    return by_position < by_channel


@functools.lru_cache(maxsize=64)
def _taps(kh, kw, stride, pitch):
    """Each tap's phase plane and shift in it, taps in (kh, kw) order."""
    t = np.arange(kh * kw)
    rows, cols = t // kw, t % kw
    phases = rows % stride * stride + cols % stride
    return phases.astype(np.int64), (rows // stride * pitch + cols // stride).astype(np.int64)


@functools.lru_cache(maxsize=64)
def _phase_order(kw, stride):
    """Where each kw sits among a kh's weight-gradient columns, which hold them in phase order (0, 2, 1 for stride
    2): the index that puts them back in order."""
    return np.argsort([k for b in range(stride) for k in range(b, kw, stride)], kind="stable")


def _fold(x_shape, w_shape, stride) -> int:
    """How many kernel columns the forward folds into each GEMM's K beside the input channels: the kernel's width
    for stride-1 layers with fewer than _MIN_CHANNELS input channels, whose K would be too short (see
    _FOLD_MAX_OUT_CHANNELS), else 1."""
    o, c, kh, kw = w_shape
    if tuple(stride) != (1, 1) or c >= _MIN_CHANNELS or max(kh, kw) > _FOLD_MAX_KERNEL:
        return 1
    if o > _FOLD_MAX_OUT_CHANNELS and (c * kw < _FOLD_LONG_K or o > _FOLD_MAX_OUT_CHANNELS_LONG_K):
        return 1
    return kw if o * x_shape[2] * (x_shape[3] + kw) <= _FOLD_MAX_OUTPUT_VALUES else 1


def _plain(w_shape, dtype, padding, dilation, groups) -> bool:
    """The conditions every pass here shares: float32, undilated, ungrouped, padding under the kernel's size on
    every side."""
    if dtype != np.float32 or groups != 1 or tuple(dilation) != (1, 1):
        return False
    pt, pb, pl, pr = padding
    return min(padding) >= 0 and max(pt, pb) < w_shape[2] and max(pl, pr) < w_shape[3]


def _takes(w_shape, dtype, padding, dilation, groups, weight_grad: bool = False) -> bool:
    """_plain's conditions, a kernel of one of _KERNELS, at least _MIN_OUT_CHANNELS output channels and (but for a
    weight gradient, whose K is the positions) at least _MIN_CHANNELS input channels."""
    o, c, kh, kw = w_shape
    if (kh, kw) not in _KERNELS or o < _MIN_OUT_CHANNELS or (c < _MIN_CHANNELS and not weight_grad):
        return False
    return _plain(w_shape, dtype, padding, dilation, groups)


def applies(x_shape, w_shape, dtype, stride, padding, dilation, groups, weight_grad: bool = False) -> bool:
    """Whether conv2d of these shapes (or with `weight_grad`, its weight gradient) runs here: stride 1 or 2 and
    few enough channels in all (see _MAX_CHANNEL_PRODUCT) beside _takes' conditions, or a forward that folds the
    kernel's columns into K (_fold), on a CPU with the micro-kernel and Numba."""
    if not weight_grad and _fold(x_shape, w_shape, stride) > 1:
        return _plain(w_shape, dtype, padding, dilation, groups) and _kernels() is not None
    if tuple(stride) not in ((1, 1), (2, 2)) or not _takes(w_shape, dtype, padding, dilation, groups, weight_grad):
        return False
    o, c, kh, kw = w_shape
    if weight_grad and tuple(stride) == (2, 2) and c * o > _MAX_STRIDE2_WGRAD_CHANNEL_PRODUCT:
        return False
    if c * o > _MAX_CHANNEL_PRODUCT:
        oh, ow, _, _ = _geometry(x_shape[2], x_shape[3], kh, kw, stride[0], padding)
        if weight_grad or c * o > _MAX_CHANNEL_PRODUCT_SMALL_MAP or oh * ow > _SMALL_MAP:
            return False
    return _kernels() is not None


class _Kernels(NamedTuple):
    """The compiled kernels, each compiled where first called: a variant per way of filling the planes and of
    laying out the products, so that a model compiles only the code its layers run."""

    forward_stride1: object  # pitched positions as the micro-kernel's columns
    forward_phases: object  # the same, stride 2 or (a stride-2 input gradient's phase) output step 2
    forward_by_position: object  # positions as the micro-kernel's rows (small maps)
    weight_grad_stride1: object  # weight gradient, stride 1
    weight_grad_stride2: object  # weight gradient, stride 2


def _kernels():
    """The compiled kernels (_Kernels), or None where Numba or the micro-kernel is missing or the NumPy backend is
    chosen (EMBER_FUSION_BACKEND=numpy, asked again at every call, as kernel_for does)."""
    if not compiled_allowed() or background.numpy_only() or not microkernel_address():
        return None
    if "kernels" not in _state:
        from ember.kernels.numba_loader import compile_source

        found = [compile_source(SOURCE, name) for name in _Kernels._fields]
        _state["kernels"] = None if found[0] is None else _Kernels(*(background.defer(k) for k in found))
    return _state["kernels"]


_state: dict = {}


class _ForwardPlan(NamedTuple):
    """What conv2d works out from the shapes alone: the output and plane geometry, the taps, the micro-kernel and
    the scratch shapes of each chunk."""

    oh: int
    ow: int
    pitch: int
    plane: int
    fold: int  # kernel columns folded into K (fill_shifted), 1 for none
    woff: np.ndarray  # each tap's offset in the weight, in values (_tap_offsets)
    xoff: np.ndarray  # ... and in the planes
    ukr: int
    nr: int
    rows: int  # output positions of the by-position mode's scratch, 0 where the columns are positions
    ldc: int
    place: np.ndarray


@functools.lru_cache(maxsize=256)
def _forward_plan(x_shape, w_shape, stride: int, padding) -> _ForwardPlan:
    """conv2d's plan for these shapes (cached: a training step asks for the same few every time)."""
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    oh, ow, pitch, plane = _geometry(h, wd, kh, kw, stride, padding)
    fold = _fold(x_shape, w_shape, (stride, stride))
    if fold > 1:  # a tap per kernel row, over (c, kw): see fill_shifted
        phases, shifts = np.zeros(kh, np.int64), np.arange(kh, dtype=np.int64) * pitch + kw - 1
    else:
        phases, shifts = _taps(kh, kw, stride, pitch)
    rows = oh * ow if _by_position(oh, ow, pitch, o) else 0
    nr = _microkernel(o if rows else oh * pitch)[1]
    ukr = taps_microkernel_address(nr)
    ldc = 0 if rows else _round(oh * pitch)  # by positions the blocks go straight back into out
    woff, xoff = _tap_offsets(phases, shifts, c * fold, plane, -(-o // MR) * MR if rows else MR)
    return _ForwardPlan(oh, ow, pitch, plane, fold, woff, xoff, ukr, nr, rows, ldc,
                        np.array([oh, ow, 1, 0, 0], np.int64))


def _tap_offsets(phases, shifts, channels: int, plane: int, panel: int) -> tuple:
    """(woff, xoff): each tap's offset in values in the weight (its taps panel * channels apart: MR-row panels, or
    by positions the padded output channels) and in the planes (tap t reads phase plane phases[t] shifted by
    shifts[t]), for the micro-kernel, which runs a block's taps in one call."""
    taps = len(phases)
    return np.arange(taps, dtype=np.int64) * channels * panel, phases * channels * plane + shifts


def conv2d(x: np.ndarray, w: np.ndarray, stride: int, padding) -> np.ndarray:
    """conv2d of float32 NCHW `x` by (O, C, KH, KW) `w`, stride 1 or 2 both ways, padding (top, bottom, left,
    right); call only where applies() said yes."""
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    plan = _forward_plan(x.shape, w.shape, stride, tuple(padding))
    fold, ldc, rows = plan.fold, plan.ldc, plan.rows
    if fold > 1:  # (kh, (c, kw), o)
        wq = w.transpose(2, 1, 3, 0).reshape(kh, c * kw, o)
    else:  # ((kh, kw), c, o)
        wq = w.reshape(o, c, kh * kw).transpose(2, 1, 0)
    wq = _padded(wq) if rows else _panels(wq)
    x = np.ascontiguousarray(x)
    out = np.empty((n, o, plan.oh, plan.ow), np.float32)
    kernels = _kernels()
    forward = (kernels.forward_by_position if rows
               else kernels.forward_stride1 if stride == 1 else kernels.forward_phases)
    split, tr = deinterleave_address(), transpose_address()

    parts = parallel.chunks(n, compiled=True, flops=2.0 * w.size * n * plan.oh * plan.ow)
    xq, buf, bt = _scratch(len(parts), (stride * stride, c * fold, plan.plane), (o, ldc), (rows, o))
    parallel.run_kernel(forward, parts, (plan.ukr, plan.nr, tr, split, x, wq, plan.woff, plan.xoff, stride,
                                              fold, padding[0], padding[2], plan.pitch, out, plan.place), (xq, buf, bt))
    return out


def _padded(wq: np.ndarray) -> np.ndarray:
    """A (taps, K, O) weight (any strides) as a contiguous (taps, K, O_pad), zero past O: whole MR-row panels."""
    taps, k, o = wq.shape
    out = np.empty((taps, k, -(-o // MR) * MR), np.float32)
    out[:, :, :o] = wq
    out[:, :, o:] = 0
    return out


def _panels(wq: np.ndarray) -> np.ndarray:
    """A (taps, K, O) weight (any strides) as MR-row panels, (O_pad / MR, taps, K, MR), zero past O: one
    micro-kernel call's A values contiguous, where reading MR values of every O_pad a k used 16 or 32 bytes of each
    64-byte line and moved the whole weight through L1 once per column block (ResNet-20's layers, one thread on a
    Zen 3: 2-9% less time)."""
    taps, k, o = wq.shape
    out = np.empty((-(-o // MR), taps, k, MR), np.float32)
    whole = o // MR
    out[:whole] = wq[:, :, :whole * MR].reshape(taps, k, whole, MR).transpose(2, 0, 1, 3)
    if whole < out.shape[0]:
        out[whole] = 0
        out[whole, :, :, :o - whole * MR] = wq[:, :, whole * MR:]
    return out


_PAGE = 1024  # float32 values in a 4 KB page


def _scratch(parts: int, *shapes) -> list[np.ndarray]:
    """float32 scratch arrays of `shapes`, each with a row per chunk, in the calling thread's workspace: each
    chunk's rows together, on pages of their own, so that the threads' scratch does not interleave. (Laid out
    array by array, the second chunk's planes followed the first's directly; its copies took twice the first
    chunk's time and, in stretches, six times: docs/performance.md, fourteenth pass.)"""
    sizes = [math.prod(shape) for shape in shapes]  # math.prod: np.prod's call costs a few us a shape
    if parts == 1:
        per = sum(sizes)
        work = parallel.workspace(per, np.float32)
    else:
        per = -(-sum(sizes) // _PAGE) * _PAGE
        work = parallel.workspace(per * parts + _PAGE, np.float32)
        skip = (-work.ctypes.data % (4 * _PAGE)) // 4
        work = work[skip:skip + per * parts]
    chunks = work.reshape(parts, per)
    arrays, start = [], 0
    for size, shape in zip(sizes, shapes):
        arrays.append(chunks[:, start:start + size].reshape(parts, *shape))
        start += size
    return arrays


def weight_grad(x: np.ndarray, g: np.ndarray, stride: int, padding, kernel_hw) -> np.ndarray:
    """conv2d's weight gradient, (O, C, KH, KW), for float32 input `x` and output gradient `g` (stride 1 or 2
    both ways); call only where applies() said yes."""
    n, c, h, wd = x.shape
    o = g.shape[1]
    kh, kw = kernel_hw
    oh, ow, pitch, plane = _geometry(h, wd, kh, kw, stride, padding)
    opad = -(-o // MR) * MR
    ldg = _round(oh * pitch)
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    kernels = _kernels()
    weight_grad_samples = kernels.weight_grad_stride1 if stride == 1 else kernels.weight_grad_stride2
    ukr, nr = _microkernel(*(len(range(b, kw, stride)) * c for b in range(stride)))  # each phase's columns
    tr, split = transpose_address(), deinterleave_address()
    planes = stride * stride * c * plane
    phase_planes = planes if stride > 1 else 0  # stride 1 transposes the input straight into xt

    parts = parallel.chunks(n, compiled=True, flops=2.0 * o * c * kh * kw * n * oh * ow)
    xq, xt, gq = _scratch(len(parts), (phase_planes // plane, c, plane), (stride * stride, plane, c), (opad, ldg))
    # a chunk with samples writes its whole total; only an empty batch's one chunk has none
    totals = (np.empty if n else np.zeros)((len(parts), o, kh * kw * c), np.float32)
    parallel.run_kernel(weight_grad_samples, parts, (ukr, nr, tr, split, x, g, kh, kw, stride, padding[0],
                                                          padding[2], pitch), (xq, xt, gq, totals))
    total = totals[0]
    for part in totals[1:]:
        total += part
    if stride > 1:
        total = total.reshape(o, kh, kw, c)[:, :, _phase_order(kw, stride)]
    return np.ascontiguousarray(total.reshape(o, kh, kw, c).transpose(0, 3, 1, 2))


def applies_transposed(g_shape, w_shape, dtype, stride, padding, dilation, groups) -> bool:
    """Whether conv_transpose2d of an output gradient `g_shape` by a (O, C, 3, 3) weight with stride 2 (a stride-2
    conv2d's input gradient) runs here: _takes' conditions, at least _MIN_CHANNELS each way and at most
    _MAX_CHANNEL_PRODUCT channel pairs."""
    if tuple(stride) != (2, 2) or w_shape[2:] != (3, 3) or min(w_shape[:2]) < _MIN_CHANNELS \
            or not _takes(w_shape, dtype, padding, dilation, groups):
        return False
    return w_shape[0] * w_shape[1] <= _MAX_CHANNEL_PRODUCT and _kernels() is not None


def input_grad_stride2(g: np.ndarray, w: np.ndarray, padding, out_hw) -> np.ndarray:
    """conv_transpose2d of float32 `g` (N, O, OH, OW) by (O, C, 3, 3) `w`, stride 2, padding (top, bottom, left,
    right), output (N, C) + out_hw; call only where applies_transposed() said yes.

    Each of the output's four stride phases is a stride-1 convolution of g: output (2Y' + a - pt, 2X' + b - pl)
    sums g[:, Y' - dh, X' - dw] * w[:, :, a + 2dh, b + 2dw] over the taps of its phase (2 x 2, 2 x 1, 1 x 2 or
    1 x 1), so the forward kernel runs once per phase on g's plane padded by one row and column before it,
    writing every second row and column of the output."""
    n, o, oh, ow = g.shape
    c = w.shape[1]
    h, wd = out_hw
    pt, _, pl, _ = padding
    pitch = ow + 1  # a row's right padding is the next row's left padding, as conv2d's
    plane = _round((oh + 3) * pitch + 2)
    phases = []
    for a in range(2):
        y0 = max(0, -(-(pt - a) // 2))  # the first phase row inside the output
        rows = (h - 1 + pt - a) // 2 - y0 + 1
        for b in range(2):
            x0 = max(0, -(-(pl - b) // 2))
            cols = (wd - 1 + pl - b) // 2 - x0 + 1
            if rows <= 0 or cols <= 0:
                continue
            taps = [(dh, dw) for dh in range(len(range(a, 3, 2))) for dw in range(len(range(b, 3, 2)))]
            wq = np.empty((len(taps), o, c), np.float32)
            for t, (dh, dw) in enumerate(taps):
                wq[t] = w[:, :, a + 2 * dh, b + 2 * dw]
            shifts = np.array([(y0 + 1 - dh) * pitch + x0 + 1 - dw for dh, dw in taps], np.int64)
            place = np.array([rows, cols, 2, 2 * y0 + a - pt, 2 * x0 + b - pl], np.int64)
            woff, xoff = _tap_offsets(np.zeros(len(taps), np.int64), shifts, o, plane, MR)
            phases.append((_panels(wq), woff, xoff, place))
    g = np.ascontiguousarray(g)
    out = np.empty((n, c, h, wd), np.float32)
    most = max(int(place[0]) for *_, place in phases) * pitch
    ldc = _round(most)
    forward = _kernels().forward_phases
    nr = _microkernel(most)[1]
    ukr = taps_microkernel_address(nr)
    split, tr = deinterleave_address(), transpose_address()
    parts = parallel.chunks(n, compiled=True, flops=2.0 * w.size * n * oh * ow)
    xq, buf, no_rows = _scratch(len(parts), (1, o, plane), (c, ldc), (0, c))
    for wq, woff, xoff, place in phases:  # a split each: the compiled kernel runs one phase a call
        parallel.run_kernel(forward, parts, (ukr, nr, tr, split, g, wq, woff, xoff, 1, 1, 1, 1, pitch, out,
                                                  place), (xq, buf, no_rows))
    return out
