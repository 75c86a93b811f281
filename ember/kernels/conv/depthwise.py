"""Depthwise convolution (one input channel per group, m filters each) as compiled kernels (Numba).

Each works one (sample, channel) plane at a time, so the plane stays in cache while all kh*kw taps
pass over it, and the planes are split over the batch threads. The arrays are flat and indexed with
unsigned offsets: Numba wraps a possibly negative index around, and that test kept the loops from
vectorising (a 4-D indexed version ran 4-8x slower than this and lost to NumPy's taps at stride 1).
The forward runs each plane's taps as loops over all its rows at once (see depthwise_forward), since a
loop over one row of a 7-28 wide plane is too short to vectorise; a 3x3 kernel's nine taps go in one pass.
MobileNetV2's (32, 384, 14, 14) stride-1 layer: 29 ms with NumPy's taps, 5.8 ms with a loop per row,
3.0 ms now, on one thread. Where rows land in the phases and where taps read are found once per call, not
per plane: on small planes those divisions cost as much as the arithmetic (MobileNetV2's seventeen depthwise
layers at batch 1: 3.7 -> 2.5 ms; PyTorch 1.8 ms). The weight gradient reads the same phases, all nine taps in one
pass over each row of g. A stride-1 layer's input gradient is the forward kernel on the flipped weight (conv.py).
Without Numba, or for other dtypes, conv.py runs its NumPy paths.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import parallel
from ember.kernels.numba_loader import contiguous, kernel_for
from ember.kernels.selection import Table

_SOURCE = '''
import numpy as np
from numba import njit


@njit(inline="always")
def _columns(off, sw, ow, W):
    # output columns lo <= xx < hi whose input column xx*sw + off lies inside [0, W)
    lo = 0 if off >= 0 else (sw - 1 - off) // sw
    hi = max(lo, min(ow, (W - 1 - off) // sw + 1)) if W - 1 - off >= 0 else lo
    return lo, hi


@njit(inline="always")
def _tap(i, j, sh, sw, dh, dw, PHs, PWs):
    # where tap (i, j) reads output 0's value in depthwise_forward's phases: phase ((i*dh) % sh, (j*dw) % sw),
    # row (i*dh) // sh, column (j*dw) // sw
    return (((i * dh) % sh * sw + (j * dw) % sw) * PHs + (i * dh) // sh) * PWs + (j * dw) // sw


@njit(inline="always")
def _phase_plan(H, W, sh, sw, pt, pl, dh, dw, oh, ow, kh, kw):
    # depthwise_forward's phases of a padded plane: rows and columns per phase, the input rows inside them, each
    # phase column's range of input columns, where each input row starts in the phases, and where each tap reads.
    # They depend on the shapes only: found once per call, not per plane, whose few dozen values cost less than
    # these divisions (MobileNetV2's 7x7 planes).
    PHs = oh + ((kh - 1) * dh) // sh + 1  # rows per phase
    PWs = ow + ((kw - 1) * dw) // sw + 1  # columns per phase
    rows = min(H, max(0, PHs * sh - pt))  # input rows inside the phases' rows
    q_lo = np.empty(sw, np.int64)  # phase column ph's column q is padded column q*sw + ph, input column q*sw + ph - pl
    q_hi = np.empty(sw, np.int64)
    for ph in range(sw):
        q_lo[ph] = max(0, (pl - ph + sw - 1) // sw)
        q_hi[ph] = min(PWs, (W - 1 + pl - ph) // sw + 1)
    row_at = np.empty(max(rows, 1) * sw, np.int64)
    for r in range(rows):
        pr = r + pt
        for ph in range(sw):
            row_at[r * sw + ph] = (((pr % sh) * sw + ph) * PHs + pr // sh) * PWs
    taps = np.empty(kh * kw, np.int64)
    for i in range(kh):
        for j in range(kw):
            taps[i * kw + j] = _tap(i, j, sh, sw, dh, dw, PHs, PWs)
    return PHs, PWs, rows, q_lo, q_hi, row_at, taps


@njit(inline="always")
def _fill_column_pairs(phases, x, xb, rows, W, pl, row_at, q_lo, q_hi):
    # _fill_phases at stride 2: a row's two phases in one loop over its column pairs, which LLVM vectorises, where a
    # strided loop per phase did not (MobileNetV2's (1, 96, 112, 112) layer: 0.67-0.71 -> 0.46 ms on one core, its
    # (1, 144, 56, 56) 0.29-0.32 -> 0.26); on rows of a few pairs the loops per phase ran faster (14 x 14: 0.14 against
    # 0.18 ms), so _fill_phases takes this from 16 pairs
    qa, qb = max(q_lo[0], q_lo[1]), min(q_hi[0], q_hi[1])
    for r in range(rows):
        d0, d1 = row_at[r * 2], row_at[r * 2 + 1]
        src = xb + r * W - pl
        for q in range(qa, qb):
            phases[np.uint64(d0 + q)] = x[np.uint64(src + 2 * q)]
            phases[np.uint64(d1 + q)] = x[np.uint64(src + 2 * q + 1)]
        for ph in range(2):  # each phase's columns outside the pairs
            d = row_at[r * 2 + ph]
            for q in range(q_lo[ph], min(qa, q_hi[ph])):
                phases[np.uint64(d + q)] = x[np.uint64(src + q * 2 + ph)]
            for q in range(max(qb, q_lo[ph]), q_hi[ph]):
                phases[np.uint64(d + q)] = x[np.uint64(src + q * 2 + ph)]


@njit(inline="always")
def _fill_phases(phases, x, xb, rows, sw, W, pl, row_at, q_lo, q_hi):
    # copies the plane at x[xb:] into its phases; every plane writes the same positions, so the padding, zeroed
    # once, stays zero
    if sw == 2 and min(q_hi[0], q_hi[1]) - max(q_lo[0], q_lo[1]) >= 16:
        _fill_column_pairs(phases, x, xb, rows, W, pl, row_at, q_lo, q_hi)
        return
    for r in range(rows):
        for ph in range(sw):
            d = row_at[r * sw + ph]
            src = xb + r * W + ph - pl
            for q in range(q_lo[ph], q_hi[ph]):
                phases[np.uint64(d + q)] = x[np.uint64(src + q * sw)]


def depthwise_forward(x, w, C, H, W, sh, sw, pt, pl, dh, dw, oh, ow, scale, shift, bounds, mode, out, t0, t1):
    # out[n, c*m + q, y, xx] = sum_ij x[n, c, y*sh - pt + i*dh, xx*sw - pl + j*dw] * w[c*m + q, 0, i, j] for the
    # planes t = n*O + o, t0 <= t < t1 (x and out flat). The padded plane is split into sh*sw phases (phase
    # (a, b) holds the padded rows r*sh + a and columns q*sw + b), in which output (y, xx) of tap (i, j) sits
    # at row y + (i*dh)//sh, column xx + (j*dw)//sw: at one offset per tap from the output's own flat index
    # k = y*PWs + xx. So each tap is one loop over every output of the plane, long enough to vectorise on
    # small planes (a loop per row of 7-28 did not), computing only the pitch's few unused columns besides.
    # mode 1-3: each output then becomes out * scale[o] + shift[o] (channel_affine's rounding), mode 2 through
    # relu's select, mode 3 clipped to bounds (lo, hi) as clip does (max then min, NaN kept): the jit's
    # conv2d_affine, an eval batch norm and its activation in the convolution's own pass.
    O, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    m = O // C
    PHs, PWs, rows, q_lo, q_hi, row_at, taps = _phase_plan(H, W, sh, sw, pt, pl, dh, dw, oh, ow, kh, kw)
    L = (oh - 1) * PWs + ow
    # one row of slack: the last rows' unused columns read past the end
    phases = np.zeros(sh * sw * PHs * PWs + PWs, x.dtype)
    acc = np.empty(L, x.dtype)
    zero = out.dtype.type(0)
    three = kh == 3 and kw == 3
    if three:
        b0, b1, b2, b3, b4, b5, b6, b7, b8 = (taps[0], taps[1], taps[2], taps[3], taps[4], taps[5], taps[6], taps[7],
                                              taps[8])
    for t in range(t0, t1):
        n = t // O
        o = t % O
        _fill_phases(phases, x, (n * C + o // m) * H * W, rows, sw, W, pl, row_at, q_lo, q_hi)
        if three:  # the nine taps in one pass, added in the same order as the loop below
            w0, w1, w2 = w[o, 0, 0, 0], w[o, 0, 0, 1], w[o, 0, 0, 2]
            w3, w4, w5 = w[o, 0, 1, 0], w[o, 0, 1, 1], w[o, 0, 1, 2]
            w6, w7, w8 = w[o, 0, 2, 0], w[o, 0, 2, 1], w[o, 0, 2, 2]
            for k in range(L):
                v = zero + w0 * phases[np.uint64(b0 + k)]
                v += w1 * phases[np.uint64(b1 + k)]
                v += w2 * phases[np.uint64(b2 + k)]
                v += w3 * phases[np.uint64(b3 + k)]
                v += w4 * phases[np.uint64(b4 + k)]
                v += w5 * phases[np.uint64(b5 + k)]
                v += w6 * phases[np.uint64(b6 + k)]
                v += w7 * phases[np.uint64(b7 + k)]
                v += w8 * phases[np.uint64(b8 + k)]
                acc[np.uint64(k)] = v
        else:
            for k in range(L):
                acc[np.uint64(k)] = zero
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, 0, i, j]
                    base = taps[i * kw + j]
                    for k in range(L):
                        acc[np.uint64(k)] += wv * phases[np.uint64(base + k)]
        ob = t * oh * ow
        if mode == 0:
            for y in range(oh):
                for xx in range(ow):
                    out[np.uint64(ob + y * ow + xx)] = acc[np.uint64(y * PWs + xx)]
            continue
        s, b = scale[o], shift[o]
        if mode == 1:
            for y in range(oh):
                for xx in range(ow):
                    out[np.uint64(ob + y * ow + xx)] = acc[np.uint64(y * PWs + xx)] * s + b
        elif mode == 2:
            for y in range(oh):
                for xx in range(ow):
                    v = acc[np.uint64(y * PWs + xx)] * s + b
                    out[np.uint64(ob + y * ow + xx)] = v if (v > zero or v != v) else zero
        else:
            lo, hi = bounds[0], bounds[1]
            for y in range(oh):
                for xx in range(ow):
                    v = acc[np.uint64(y * PWs + xx)] * s + b
                    v = v if (v > lo or v != v) else lo
                    out[np.uint64(ob + y * ow + xx)] = v if (v < hi or v != v) else hi


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
    # gw[c*m + q, 0, i, j] = sum over n, y, xx of g[n, c*m + q, y, xx] * x[n, c, iy, ix], for o0 <= o < o1.
    # depthwise_forward's layout turned round: with the plane in its phases, tap (i, j) reads output (y, xx)'s input
    # at one offset from y*PWs + xx, so a row's nine taps are nine sums in one pass over g's row (a loop per tap
    # re-read every row nine times and ran 4x PyTorch's time). Only the output's own columns are read: the pitch's
    # unused ones hold input values no output reads at that tap, and 0 * inf there would make a NaN.
    # The products are summed in float64, as before.
    O, kh, kw = gw.shape[0], gw.shape[2], gw.shape[3]
    m = O // C
    PHs, PWs, rows, q_lo, q_hi, row_at, taps = _phase_plan(H, W, sh, sw, pt, pl, dh, dw, oh, ow, kh, kw)
    phases = np.zeros(sh * sw * PHs * PWs + PWs, x.dtype)
    sums = np.empty(kh * kw, np.float64)
    three = kh == 3 and kw == 3
    if three:
        b0, b1, b2, b3, b4, b5, b6, b7, b8 = (taps[0], taps[1], taps[2], taps[3], taps[4], taps[5], taps[6], taps[7],
                                              taps[8])
    for o in range(o0, o1):
        for t in range(kh * kw):
            sums[t] = 0.0
        for n in range(N):
            _fill_phases(phases, x, (n * C + o // m) * H * W, rows, sw, W, pl, row_at, q_lo, q_hi)
            gb = (n * O + o) * oh * ow
            for y in range(oh):
                r = gb + y * ow  # g's row
                p = y * PWs  # its first output's place in the phases
                if three:  # the nine taps in one pass over the row
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = 0.0
                    for xx in range(ow):
                        v = g[np.uint64(r + xx)]
                        k = p + xx
                        a0 += v * phases[np.uint64(b0 + k)]
                        a1 += v * phases[np.uint64(b1 + k)]
                        a2 += v * phases[np.uint64(b2 + k)]
                        a3 += v * phases[np.uint64(b3 + k)]
                        a4 += v * phases[np.uint64(b4 + k)]
                        a5 += v * phases[np.uint64(b5 + k)]
                        a6 += v * phases[np.uint64(b6 + k)]
                        a7 += v * phases[np.uint64(b7 + k)]
                        a8 += v * phases[np.uint64(b8 + k)]
                    for t, a in enumerate((a0, a1, a2, a3, a4, a5, a6, a7, a8)):
                        sums[t] += a
                else:
                    for t in range(kh * kw):
                        base = taps[t] + p
                        a = 0.0
                        for xx in range(ow):
                            a += g[np.uint64(r + xx)] * phases[np.uint64(base + xx)]
                        sums[t] += a
        for i in range(kh):
            for j in range(kw):
                gw[o, 0, i, j] = sums[i * kw + j]
'''



DEPTHWISE = Table("conv2d: depthwise", measured_on="Intel Xeon (family 6, model 167), 2 cores, OpenBLAS 0.3.31 "
                  "SkylakeX kernels, 2026-12-02", values={
    "chunk_min_flops": (750_000, "a depthwise convolution's compiled chunks split over the threads from this much "
                                 "work each: its flops run about a tenth as fast as a GEMM's (MobileNetV2's 7x7 to "
                                 "28x28 layers at batch 1: 10-30 GFLOP/s on one thread), so a chunk repays its hand-off "
                                 "from less work than the 3 MFLOP of other compiled kernels. From the Python chunk's 10 "
                                 "MFLOP no layer of MobileNetV2 at batch 1 split: eager 16.1-16.8 -> 14.6-15.4 ms and "
                                 "jit 12.2-12.7 -> 10.5-10.9 at 3 MFLOP; from 0.75 MFLOP (its last five unsplit layers "
                                 "then split), three alternating processes: eager 13.8-14.4 -> 13.4-13.8 ms and jit "
                                 "9.1-9.8 -> 8.6-9.0 (PyTorch 10.9-11.9)"),
})


def _split(fn, total: int, flops: float, *args):
    """fn(*args, start, stop) over [0, total) split over the threads when the work is large enough (DEPTHWISE)."""
    parallel.run_kernel(fn, parallel.chunks(total, flops, compiled=True, least=DEPTHWISE["chunk_min_flops"]), args)


_MODES = {None: 1, "relu": 2, "clamp": 3}  # depthwise_forward's epilogue modes (0: none)


def applies(kernel: str, xp, a, b) -> bool:
    """Whether `kernel` ("forward", "input_grad" or "weight_grad") runs for its first two arrays `a`, `b` (Numba,
    float32/float64 of at least MIN_ELEMENTS values, one dtype)."""
    fastmath = {"reassoc"} if kernel == "weight_grad" else None
    return a.dtype == b.dtype and kernel_for(_SOURCE, f"depthwise_{kernel}", xp, a.dtype, a.size, fastmath) is not None


def forward(xp, x, w, stride, pad, dil, oh, ow, affine=None):
    """Depthwise conv2d of x (N, C, H, W) with w (C*m, 1, kh, kw), or None to use NumPy. `affine` (scale, shift,
    activation): then each output channel becomes out * scale + shift, through the activation (None, ("relu",) or
    ("clamp", lo, hi)), as channel_affine computes it (scale and shift (C*m,) arrays of x's dtype)."""
    fn = kernel_for(_SOURCE, "depthwise_forward", xp, x.dtype, x.size)
    if fn is None or w.dtype != x.dtype:
        return None
    n, c, h, wd = x.shape
    out = np.empty((n, w.shape[0], oh, ow), x.dtype)
    if affine is None:
        epilogue = (_NONE[x.dtype], _NONE[x.dtype], _NONE[x.dtype], 0)
    else:
        scale, shift, activation = affine
        if type(scale) is not np.ndarray or type(shift) is not np.ndarray or scale.dtype != x.dtype \
                or shift.dtype != x.dtype:
            return None
        bounds = np.array(activation[1:3] if activation and activation[0] == "clamp" else (0, 0), x.dtype)
        epilogue = (np.ascontiguousarray(scale), np.ascontiguousarray(shift), bounds,
                    _MODES[activation[0] if activation else None])
    _split(fn, n * w.shape[0], 2 * out.size * w.shape[2] * w.shape[3], contiguous(x), np.ascontiguousarray(w), c, h, wd,
           stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], oh, ow, *epilogue, out.reshape(-1))
    return out


_NONE = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64)}  # depthwise_forward's unused epilogue arrays


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
