"""Batch norm's training forward and backward, its eval-mode per-channel scale and shift (`channel_affine`), and
ReLU's forward and backward, as compiled kernels (Numba, `jit` extra).

Channel by channel, the statistics pass and the output pass read the same slice of x (and gy), which
still sits in cache for the second pass, so each kernel costs about one trip through memory where the
NumPy kernels in nn_extra.py make six to eight, each with a temporary. Sums accumulate in float64.
Without Numba (or with EMBER_FUSION_BACKEND=numpy) the callers use their NumPy kernels.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import elementwise, parallel
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for
from ember.kernels.selection import Algorithm, Table, algorithms, always, compiled_or_numpy, note

# Loops run over (N, C, M) views: x[n, c, :] is one contiguous run of M values. Channel by channel (bn_forward,
# bn_forward_residual, bn_backward), the statistics pass and the output pass read the same slice, which still sits
# in cache for the second pass. On small maps a channel's runs are short and a sample apart (at 8 x 8, 256 bytes
# every 16 KB), each a memory round trip the prefetchers do not see coming, so the *_by_sample kernels read a chunk's
# channels sample by sample instead, where each sample's runs lie together (BATCH_NORM's by_sample_max_plane).
# For M = 1 ((N, C), or trailing dims of size 1) the *_rows kernels sum whole rows instead. Inputs are C-contiguous
# (a broadcast gradient, e.g. of a sum, is copied once).
_SOURCE = '''
import math

import numpy as np
from numba import njit


@njit(inline="always")
def channel_stats(x, c):
    # (mean, biased variance) of channel c of the (N, C, M) view x, summed in float64
    N, C, M = x.shape
    cnt = N * M
    s = 0.0
    for n in range(N):
        for m in range(M):
            s += x[n, c, m]
    mu = s / cnt
    q = 0.0
    for n in range(N):
        for m in range(M):
            d = x[n, c, m] - mu
            q += d * d
    return mu, q / cnt


@njit(inline="always")
def chunk_stats(x, c0, c1):
    # (means, biased variances) in float64 of channels c0..c1 of the (N, C, M) view x, read sample by sample
    N, C, M = x.shape
    cnt = N * M
    s = np.zeros(c1 - c0)
    for n in range(N):
        for c in range(c0, c1):
            t = 0.0
            for m in range(M):
                t += x[n, c, m]
            s[c - c0] += t
    mu = s / cnt
    q = np.zeros(c1 - c0)
    for n in range(N):
        for c in range(c0, c1):
            t = 0.0
            mc = mu[c - c0]
            for m in range(M):
                d = x[n, c, m] - mc
                t += d * d
            q[c - c0] += t
    return mu, q / cnt


@njit(inline="always")
def run_sums(x, gy, relu_out, masked, n, c, mu_x):
    # (sum of g, sum of g * (x - mu_x)) over the run x[n, c, :], g being gy, through relu's backward at relu_out where
    # masked, in x's dtype (as many lanes as the vector holds; the callers add each run's sums in float64). The masked
    # loop adds in the same order, so the folded BN + ReLU equals relu_backward then this
    z = gy.dtype.type(0)
    s1 = z
    s2 = z
    if masked:
        for m in range(x.shape[2]):
            g = z if relu_out[n, c, m] <= 0 else gy[n, c, m]
            s1 += g
            s2 += g * (x[n, c, m] - mu_x)
    else:
        for m in range(x.shape[2]):
            g = gy[n, c, m]
            s1 += g
            s2 += g * (x[n, c, m] - mu_x)
    return s1, s2


@njit(inline="always")
def output_row(x, y, n, c, mu, k, sh, relu):
    # y[n, c, :] = (x - mu) * k + sh, through relu's select with `relu`, in x's dtype (float32 data runs twice as
    # many lanes as float64 would)
    z = y.dtype.type(0)
    if relu:
        for m in range(x.shape[2]):
            u = (x[n, c, m] - mu) * k + sh
            y[n, c, m] = u if (u > z or u != u) else z
    else:
        for m in range(x.shape[2]):
            y[n, c, m] = (x[n, c, m] - mu) * k + sh


@njit(inline="always")
def grad_row(x, gy, relu_out, masked, gx, n, c, mu, k, a, sh):
    # gx[n, c, :] = k * g + a * (x - mu) + sh, g being gy through relu's backward at relu_out where masked
    z = gy.dtype.type(0)
    if masked:
        for m in range(x.shape[2]):
            g = z if relu_out[n, c, m] <= 0 else gy[n, c, m]
            gx[n, c, m] = k * g + a * (x[n, c, m] - mu) + sh
    else:
        for m in range(x.shape[2]):
            gx[n, c, m] = k * gy[n, c, m] + a * (x[n, c, m] - mu) + sh


@njit
def affine_residual_row(x, r, y, mu, k, sh, relu):
    # y = (x - mu) * k + sh + r, through relu's select with `relu`. Compiled apart, without the callers'
    # 'reassoc': with it, LLVM may add sh + r first, and the values would no longer be the unfolded graph's
    z = y.dtype.type(0)
    if relu:
        for m in range(x.size):
            v = (x[m] - mu) * k + sh + r[m]
            y[m] = v if (v > z or v != v) else z
        return
    for m in range(x.size):
        y[m] = (x[m] - mu) * k + sh + r[m]


def bn_forward(x, w, b, eps, relu, y, mean, var, c0, c1):
    # channels c0..c1; relu: the output then goes through relu's select (the jit's folded BN + ReLU)
    N = x.shape[0]
    for c in range(c0, c1):
        mu, v = channel_stats(x, c)
        mean[c] = mu
        var[c] = v
        t = x.dtype.type
        k = t(w[c] / math.sqrt(v + eps))
        for n in range(N):
            output_row(x, y, n, c, t(mu), k, t(b[c]), relu)


def bn_forward_residual(x, w, b, eps, relu, r, y, mean, var, c0, c1):
    # bn_forward with r (x's shape) added to the output before the relu: the jit's folded BN + add (+ ReLU) of a
    # residual block
    N = x.shape[0]
    for c in range(c0, c1):
        mu, v = channel_stats(x, c)
        mean[c] = mu
        var[c] = v
        t = x.dtype.type
        k = t(w[c] / math.sqrt(v + eps))
        for n in range(N):
            affine_residual_row(x[n, c], r[n, c], y[n, c], t(mu), k, t(b[c]), relu)


def bn_backward(x, gy, mean, invstd, w, gmean, gvar, relu_out, gx, gw, gb, c0, c1):
    # channels c0..c1; relu_out (x's shape, or empty): gy is first passed through relu's backward at relu_out
    # (the jit's folded BN + ReLU), zero where relu_out <= 0
    N, C, M = x.shape
    cnt = N * M
    masked = relu_out.size > 0
    for c in range(c0, c1):
        mu = np.float64(mean[c])
        sg = 0.0
        sgx = 0.0
        mu_x = x.dtype.type(mu)
        for n in range(N):
            s1, s2 = run_sums(x, gy, relu_out, masked, n, c, mu_x)
            sg += s1
            sgx += s2
        istd = np.float64(invstd[c])
        gb[c] = sg
        gw[c] = sgx * istd
        k = istd * w[c]
        # gx = k * (gy - mean(gy) - xhat * mean(gy * xhat)) plus the statistics outputs' gradients
        a = -k * istd * istd * sgx / cnt + 2.0 * gvar[c] / cnt
        sh = -k * sg / cnt + gmean[c] / cnt
        t = x.dtype.type
        for n in range(N):
            grad_row(x, gy, relu_out, masked, gx, n, c, mean[c], t(k), t(a), t(sh))


def bn_forward_by_sample(x, w, b, eps, relu, y, mean, var, c0, c1):
    # bn_forward's values, read sample by sample through channels c0..c1 (small maps)
    N = x.shape[0]
    mu, v = chunk_stats(x, c0, c1)
    t = x.dtype.type
    k = np.empty(c1 - c0, x.dtype)
    for c in range(c0, c1):
        mean[c] = mu[c - c0]
        var[c] = v[c - c0]
        k[c - c0] = t(w[c] / math.sqrt(v[c - c0] + eps))
    for n in range(N):
        for c in range(c0, c1):
            output_row(x, y, n, c, t(mu[c - c0]), k[c - c0], t(b[c]), relu)


def bn_forward_residual_by_sample(x, w, b, eps, relu, r, y, mean, var, c0, c1):
    # bn_forward_residual's values, read sample by sample through channels c0..c1 (small maps)
    N = x.shape[0]
    mu, v = chunk_stats(x, c0, c1)
    t = x.dtype.type
    k = np.empty(c1 - c0, x.dtype)
    for c in range(c0, c1):
        mean[c] = mu[c - c0]
        var[c] = v[c - c0]
        k[c - c0] = t(w[c] / math.sqrt(v[c - c0] + eps))
    for n in range(N):
        for c in range(c0, c1):
            affine_residual_row(x[n, c], r[n, c], y[n, c], t(mu[c - c0]), k[c - c0], t(b[c]), relu)


def bn_backward_by_sample(x, gy, mean, invstd, w, gmean, gvar, relu_out, gx, gw, gb, c0, c1):
    # bn_backward's values, read sample by sample through channels c0..c1 (small maps)
    N, C, M = x.shape
    cnt = N * M
    masked = relu_out.size > 0
    sg = np.zeros(c1 - c0)
    sgx = np.zeros(c1 - c0)
    for n in range(N):
        for c in range(c0, c1):
            s1, s2 = run_sums(x, gy, relu_out, masked, n, c, mean[c])
            sg[c - c0] += s1
            sgx[c - c0] += s2
    k_t = np.empty(c1 - c0, x.dtype)
    a_t = np.empty(c1 - c0, x.dtype)
    sh_t = np.empty(c1 - c0, x.dtype)
    for c in range(c0, c1):
        istd = np.float64(invstd[c])
        gb[c] = sg[c - c0]
        gw[c] = sgx[c - c0] * istd
        k = istd * w[c]
        # gx = k * (gy - mean(gy) - xhat * mean(gy * xhat)) plus the statistics outputs' gradients
        k_t[c - c0] = k
        a_t[c - c0] = -k * istd * istd * sgx[c - c0] / cnt + 2.0 * gvar[c] / cnt
        sh_t[c - c0] = -k * sg[c - c0] / cnt + gmean[c] / cnt
    for n in range(N):
        for c in range(c0, c1):
            grad_row(x, gy, relu_out, masked, gx, n, c, mean[c], k_t[c - c0], a_t[c - c0], sh_t[c - c0])


def bn_forward_rows(x, w, b, eps, y, mean, var):
    # (N, C): channel by channel would stride through memory, so sum whole rows into per-channel arrays
    N, C = x.shape
    s = np.zeros(C)
    for n in range(N):
        for c in range(C):
            s[c] += x[n, c]
    s /= N
    q = np.zeros(C)
    for n in range(N):
        for c in range(C):
            d = x[n, c] - s[c]
            q[c] += d * d
    q /= N
    k = np.empty(C, x.dtype)
    sh = np.empty(C, x.dtype)
    mu = np.empty(C, x.dtype)
    for c in range(C):
        mean[c] = s[c]
        var[c] = q[c]
        mu[c] = s[c]
        k[c] = w[c] / math.sqrt(q[c] + eps)
        sh[c] = b[c]
    for n in range(N):
        for c in range(C):
            y[n, c] = (x[n, c] - mu[c]) * k[c] + sh[c]


def bn_backward_rows(x, gy, mean, invstd, w, gmean, gvar, gx, gw, gb):
    N, C = x.shape
    sg = np.zeros(C)
    sgx = np.zeros(C)
    for n in range(N):
        for c in range(C):
            g = gy[n, c]
            sg[c] += g
            sgx[c] += g * (x[n, c] - mean[c])
    k = np.empty(C, x.dtype)
    a = np.empty(C, x.dtype)
    sh = np.empty(C, x.dtype)
    for c in range(C):
        istd = np.float64(invstd[c])
        gb[c] = sg[c]
        gw[c] = sgx[c] * istd
        kc = istd * w[c]
        k[c] = kc
        a[c] = -kc * istd * istd * sgx[c] / N + 2.0 * gvar[c] / N
        sh[c] = -kc * sg[c] / N + gmean[c] / N
    for n in range(N):
        for c in range(C):
            gx[n, c] = k[c] * gy[n, c] + a[c] * (x[n, c] - mean[c]) + sh[c]


# channel_affine's loops are written out per activation, not one loop with a mode: clip(x, -inf, inf) and
# clip(x, 0, inf) give the plain and relu values bit for bit, but their NaN-keeping selects ran 1.4-1.9x slower
# ((1, 576, 14, 14): 10 us plain and relu, 18-19 us as a clip).
def channel_affine(x, scale, shift, out, r0, r1):
    # rows r0..r1 of the (N * C, M) view; the product and the sum rounded separately, as NumPy's two passes
    C = scale.size
    M = np.uint64(x.shape[1])
    for r in range(r0, r1):
        s = scale[r % C]
        b = shift[r % C]
        for m in range(M):
            out[r, m] = x[r, m] * s + b


def channel_affine_relu(x, scale, shift, out, r0, r1):
    # relu(x * scale + shift): relu_forward's select on channel_affine's value
    C = scale.size
    M = np.uint64(x.shape[1])
    z = out.dtype.type(0)
    for r in range(r0, r1):
        s = scale[r % C]
        b = shift[r % C]
        for m in range(M):
            v = x[r, m] * s + b
            out[r, m] = v if (v > z or v != v) else z


def channel_affine_clip(x, scale, shift, bounds, out, r0, r1):
    # np.clip(x * scale + shift, lo, hi) for (lo, hi) = bounds (x's dtype): its max then min, NaN kept
    C = scale.size
    M = np.uint64(x.shape[1])
    lo, hi = bounds[0], bounds[1]
    for r in range(r0, r1):
        s = scale[r % C]
        b = shift[r % C]
        for m in range(M):
            v = x[r, m] * s + b
            v = v if (v > lo or v != v) else lo
            out[r, m] = v if (v < hi or v != v) else hi


def channel_affine_residual(x, scale, shift, res, relu, out, r0, r1):
    # rows r0..r1: x * scale + shift + res, through relu's select with `relu` (the jit's folded eval BN + add + ReLU
    # of a residual block); x - 0 is x, so the helper's values are the unfolded graph's
    C = scale.size
    zero = x.dtype.type(0)
    for r in range(r0, r1):
        affine_residual_row(x[r], res[r], out[r], zero, scale[r % C], shift[r % C], relu)


def channel_scale(x, scale, out, r0, r1):
    C = scale.size
    M = np.uint64(x.shape[1])
    for r in range(r0, r1):
        s = scale[r % C]
        for m in range(M):
            out[r, m] = x[r, m] * s


def channel_sum(x, out):
    # sum over (N, M) per channel of an (N, C, M) view, sample by sample so that x is read in order; each run of M
    # values is summed in float64 (vectorised partial sums) and added to its channel's float64 total
    N, C, M = x.shape
    acc = np.zeros(C)
    for n in range(N):
        for c in range(C):
            s = 0.0
            for m in range(M):
                s += x[n, c, m]
            acc[c] += s
    for c in range(C):
        out[c] = acc[c]


'''


def _kernel(name: str, dtype):
    """The compiled function `name` for `dtype`, or None (no Numba, or the NumPy backend is chosen)."""
    # every size: one compiled call costs less than the NumPy kernels' several passes, even for tiny inputs;
    # 'reassoc' lets the sums vectorise (several partial sums); NaN and inf still propagate.
    return kernel_for(_SOURCE, name, np, dtype, MIN_ELEMENTS, fastmath={"reassoc"})


_AMD_VM = "AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27"
BATCH_NORM = Table("batch_norm", measured_on=_AMD_VM, values={
    "split_min": (1 << 17, "from this many values the channels are split over the threads (ResNet-20's (32, 16, 32, "
                           "32): forward 0.155 -> 0.139 ms, backward 0.188 -> 0.160; the passes are mostly "
                           "memory-bound)"),
    "native_split_min": (1 << 16, "... from this many where the workers run compiled chunks without the GIL ((16, 16, "
                                  "16, 16): forward 19 -> 17 us, backward 26 -> 21; 32K values 7-10% slower)"),
    "by_sample_max_plane": (64, "maps of at most this many values (8 x 8) are read sample by sample through a chunk's "
                                "channels, larger ones channel by channel (two threads, in us, channel by channel "
                                "against by sample; ResNet-20's (32, 64, 8, 8): backward with its ReLU mask 76 "
                                "against 52, forward with ReLU 56 against 38, with the residual 60 against 53; "
                                "(32, 32, 16, 16): 71-73 against 75-76, 54 against 57-60; AMD EPYC Zen 4, 2026-12-05)"),
})
CHANNEL_AFFINE = Table("channel_affine", measured_on="Intel Xeon (family 6, model 167), 2 cores, OpenBLAS 0.3.31 "
                       "SkylakeX kernels, 2026-12-02", values={
    "split_min": (1 << 16, "the scale-and-shift pass is memory-bound; from this many values its rows split over the "
                           "threads. It mostly follows a GEMM, whose OpenBLAS threads hold the other core for 0.2 ms: "
                           "a split then runs its second chunk in the caller (thread_pool), costing what one thread "
                           "costs, and halves the pass where the worker is free. In one process, 2M -> 64K: "
                           "mobilenet_v2 b1 eager, five rounds: best of each 0.4% slower to 7.5% faster, medians 3-6% "
                           "faster (18.4 -> 17.0 ms, 17.2 -> 16.5); LeNet-5 training 3.52 -> 3.40, ResNet-20 64.2 -> "
                           "62.7, resnet18 b1 27.7 -> 27.3, mobilenet_v2 b32 389 -> 386"),
})
for _op in ("batch_norm", "batch_norm_backward"):
    algorithms(_op, [
        Algorithm("compiled samples", "training mode, NumPy float32/float64 arrays of one dtype, maps of at most "
                  "by_sample_max_plane values, Numba: a chunk of channels read sample by sample, once for the statistics "
                  "and once for the output (adding the jit's folded residual and relu), channels split from split_min",
                  None),
        Algorithm("compiled channels", "as compiled samples on larger maps, channel by channel", None),
        Algorithm("numpy", "otherwise: NumPy", always)])
compiled_or_numpy("channel_affine", "compiled rows", "float32/float64, at least 16384 values, Numba: scale, shift "
                  "(the jit's folded residual) and activation in one pass, rows split from split_min")
compiled_or_numpy("channel_sum", "compiled pass", "a sum over every dim but the channels of 16384+ contiguous "
                  "float32/float64 values (a convolution's bias gradient), Numba")


def _per_channel(p, c: int, dtype, fill: float):
    """A (C,) float64 array of a per-channel parameter (or `fill` for None)."""
    return np.full(c, fill) if p is None else np.asarray(p, dtype=np.float64).reshape(c)


def _by_sample(x) -> bool:
    """Whether the (N, C, ...) batch's maps are small enough to be read sample by sample (not (N, C): rows)."""
    plane = x.size // (x.shape[0] * x.shape[1]) if x.size else 0
    return 1 < plane <= BATCH_NORM["by_sample_max_plane"]


def _channel_chunks(x) -> list:
    """x's channels in chunks for parallel.run_kernel: split from BATCH_NORM's thresholds, else one."""
    least = BATCH_NORM["native_split_min" if parallel.native() else "split_min"]
    return parallel.chunks(x.shape[1]) if x.size >= least else [(0, x.shape[1])]


def batch_norm_forward(xp, x, w, b, eps: float, then_relu: bool = False, residual=None, out=None):
    """(y, mean, biased var) of training-mode batch norm, y plus `residual` where given, then through relu with
    `then_relu` (the jit's folded BN (+ add) + ReLU), y written into `out` where given (a plan's buffer: x's shape
    and dtype, contiguous); or None where the NumPy kernel must run."""
    if not elementwise.float_arrays(xp, x):
        return None
    if residual is not None and (not elementwise.float_arrays(xp, x, residual) or residual.shape != x.shape):
        return None
    c = x.shape[1]
    rows = x.size == x.shape[0] * c
    by_sample = _by_sample(x)
    name = "bn_forward_rows" if rows else "bn_forward" if residual is None else "bn_forward_residual"
    fn = _kernel(name + "_by_sample" if by_sample else name, x.dtype)
    if fn is None:
        return None
    note("batch_norm", "compiled samples" if by_sample else "compiled channels")
    y = out if out is not None and out.dtype == x.dtype and out.shape == x.shape and out.flags.c_contiguous \
        else np.empty(x.shape, x.dtype)
    mean, var = np.empty(c, x.dtype), np.empty(c, x.dtype)
    shape = (x.shape[0], c) if rows else (x.shape[0], c, -1)
    head = (np.ascontiguousarray(x).reshape(shape), _per_channel(w, c, x.dtype, 1.0), _per_channel(b, c, x.dtype, 0.0),
            float(eps))
    if rows:  # (N, C): the add's and relu's own kernels after, in place
        fn(*head, y.reshape(shape), mean, var)
        if residual is not None:
            np.add(y, residual, out=y)
        if then_relu and elementwise.relu(xp, y, into=y) is None:
            return None
        return y, mean, var
    middle = (bool(then_relu),) if residual is None else (bool(then_relu), np.ascontiguousarray(residual).reshape(shape))
    parallel.run_kernel(fn, _channel_chunks(x), head + middle + (y.reshape(shape), mean, var))
    return y, mean, var


def batch_norm_backward(xp, x, w, mean, var, gy, gmean, gvar, eps: float, relu_out=None):
    """(gx, gw, gb) of training-mode batch norm, gy first through relu's backward at `relu_out` where given (the
    jit's folded BN + ReLU), or None where the NumPy kernel must run."""
    if gy is None or not elementwise.float_arrays(xp, x, gy) or mean.dtype != x.dtype or var.dtype != x.dtype:
        return None
    if relu_out is not None and not elementwise.float_arrays(xp, x, relu_out):
        return None
    c = x.shape[1]
    rows = x.size == x.shape[0] * c
    by_sample = _by_sample(x)
    fn = _kernel("bn_backward_rows" if rows else "bn_backward_by_sample" if by_sample else "bn_backward", x.dtype)
    if fn is None:
        return None
    note("batch_norm_backward", "compiled samples" if by_sample else "compiled channels")
    if rows and relu_out is not None:  # (N, C): relu's own backward kernel first
        gy, relu_out = elementwise.relu_backward(xp, gy, relu_out), None
    invstd = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    gx = np.empty(x.shape, x.dtype)
    gw, gb = np.empty(c, x.dtype), np.empty(c, x.dtype)
    shape = (x.shape[0], c) if rows else (x.shape[0], c, -1)
    head = (np.ascontiguousarray(x).reshape(shape), np.ascontiguousarray(gy).reshape(shape), mean, invstd,
            _per_channel(w, c, x.dtype, 1.0), _per_channel(gmean, c, x.dtype, 0.0), _per_channel(gvar, c, x.dtype, 0.0))
    tail = (gx.reshape(shape), gw, gb)
    if rows:
        fn(*head, *tail)
    else:
        mask = _NO_MASK[x.dtype] if relu_out is None else np.ascontiguousarray(relu_out).reshape(shape)
        parallel.run_kernel(fn, _channel_chunks(x), head + (mask,) + tail)
    return gx, gw, gb


_NO_MASK = {np.dtype(t): np.empty((0, 0, 0), t) for t in (np.float32, np.float64)}  # bn_backward's relu_out: none


def channel_affine(xp, x, scale, shift, activation=None, residual=None):
    """x * scale + shift per channel (dim 1; scale or shift may be None), plus `residual` (x's shape, with a scale and
    a shift) where given, then `activation` (None, ("relu",) or ("clamp", lo, hi); relu alone with a residual), in
    one pass, rows split over the threads from CHANNEL_AFFINE's split_min; or None where the NumPy kernel must run
    (below MIN_ELEMENTS values, NumPy's two calls cost less than a compiled one)."""
    if (x.size < MIN_ELEMENTS or x.ndim < 2 or not elementwise.float_arrays(xp, x)
            or (scale is not None and (type(scale) is not np.ndarray or scale.dtype != x.dtype))
            or (shift is not None and (type(shift) is not np.ndarray or shift.dtype != x.dtype))
            or (activation is not None and (shift is None or activation[0] not in ("relu", "clamp")))):
        return None
    if residual is not None and (scale is None or shift is None or not elementwise.float_arrays(xp, x, residual)
                                 or activation not in (None, ("relu",))):
        return None
    if scale is None:  # a shift alone (a convolution's bias): x * 1 is x exactly, so x * 1 + shift is x + shift
        scale = np.ones(x.shape[1], x.dtype)
    name = "channel_scale" if shift is None else "channel_affine"
    if activation is not None:
        name = "channel_affine_relu" if activation[0] == "relu" else "channel_affine_clip"
    if residual is not None:
        name = "channel_affine_residual"
    fn = _kernel(name, x.dtype)
    if fn is None:
        return None
    note("channel_affine", "compiled rows")
    rows = x.shape[0] * x.shape[1]
    out = np.empty(x.shape, x.dtype)
    args = [np.ascontiguousarray(x).reshape(rows, -1), np.ascontiguousarray(scale)]
    if shift is not None:
        args.append(np.ascontiguousarray(shift))
    if residual is not None:
        args += [np.ascontiguousarray(residual).reshape(rows, -1), activation is not None]
    elif activation is not None and activation[0] == "clamp":
        args.append(np.array(activation[1:3], x.dtype))
    args.append(out.reshape(rows, -1))
    parallel.run_kernel(fn, parallel.chunks(rows) if x.size >= CHANNEL_AFFINE["split_min"] else [(0, rows)], tuple(args))
    return out


# A convolution's bias gradient, NumPy's add.reduce over (0, 2, 3): 55 us on (64, 6, 28, 28) float32, 23 us here.
def channel_sum(xp, x, axis, keepdim: bool):
    """x summed over every dim but dim 1 (`axis` those dims, in order) in one compiled pass, accumulated in float64
    and rounded once, or None where NumPy's reduce must run."""
    if (x.size < MIN_ELEMENTS or x.ndim < 3 or axis != (0,) + tuple(range(2, x.ndim)) or not elementwise.float_arrays(xp, x)
            or not x.flags.c_contiguous):
        return None
    fn = _kernel("channel_sum", x.dtype)
    if fn is None:
        return None
    note("channel_sum", "compiled pass")
    c = x.shape[1]
    out = np.empty(c, x.dtype)
    fn(x.reshape(x.shape[0], c, -1), out)
    return out.reshape((1, c) + (1,) * (x.ndim - 2)) if keepdim else out
