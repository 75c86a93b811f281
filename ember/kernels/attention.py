"""Attention's softmax and the softmax's gradient over score rows, one compiled pass each (float32, `jit` extra), and
the forward as one compiled kernel per (batch, head) entry where Ember's GEMM driver runs (`entries`).

On NumPy the forward's softmax is five passes over the (..., L, S) scores (the causal mask's copy, the row
maxima, the subtraction, exp, the row sums and the division), and its gradient three (dP * P, the row sums, the
subtraction and product), each with its own temporary; at a transformer's (16, 4, 64, 64) causal scores they
took 0.6 ms of the forward's 0.75 on one core. Here each row is finished while it is in cache: the causal
block is skipped (its weights set to 0), and exp is exp_compiled's vectorised float32 exp, flushed to 0 below
e^-87 (< 2e-38, where NumPy's would give a subnormal). A NaN score makes its row NaN; a row that attends
nowhere (every score -inf) gets weights 0, as PyTorch's attention gives (its plain softmax gives NaN). Results differ from the NumPy path by float32 rounding
(this exp is within 1.2 float32 ulps on [-87, 0], NumPy's within 2.4; the sums are added in another order), which is why the path is chosen once per call
from the whole size, never per thread's chunk.

Without a mask the forward is one kernel (`attention_entries`): for each (batch, head) entry the scores q k^T go
through the GEMM driver into the entry's rows of the weights, each row's softmax of scores * scale runs while
they are in cache, and p v goes through the driver into the output; the entries are split over the pool's
GIL-free workers. The backward is one kernel too (`attention_backward_entries`): per entry dv = p^T g, dp = g v^T
into a scratch block, each row of it turned into the scores' gradient while in cache, dq = ds k and dk = ds^T q.
The pool passes these kernels their arrays as any layout ("A": one entry point for every layout of q, k and v), so
they reach the weights through a C-contiguous view of their address: indexed as "A" arrays, the rows' loops did not
vectorise and a worker's chunk took 1.7x the caller's. A transformer's (16, 4, 64, 32) causal attention, 2 threads,
the Xeon of docs/performance.md, 2026-12-02: forward 565 us as separate products and softmax passes per chunk of
Python, 454-495 as one kernel over "A" rows, 406 now (PyTorch's flash attention 260-290); backward 558 us as GEMMs and
compiled softmax rows, 381 as one kernel. The softmax rows are most of the forward's remaining time (about 95 ns a
row on one thread).
"""

from __future__ import annotations

import numpy as np

from ember.kernels import exp, parallel
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for
from ember.kernels.selection import Algorithm, Table, algorithms, always, note

_SOURCE = exp.SOURCE + '''
from numba import carray

from ember.kernels.sgemm_intrinsics import call_driver, float32_at

ZERO = np.float32(0.0)
NEG_INF = np.float32(-np.inf)
EXP_FLOOR = np.float32(-87.0)  # exp_compiled's exp clamps below this; e^-87 < 2e-38


@njit(inline="always")
def _softmax_row(row, i, S, causal, scale):
    # row (S,) becomes softmax(row * scale) (see softmax_rows); i is its query's index, for `causal`. Unsigned
    # indices: with signed ones Numba's negative-index wraparound keeps a branch per value and the loops scalar
    n = np.uint64(min(S, i + 1) if causal else S)
    width = np.uint64(S)
    m = NEG_INF
    for j in range(n):
        v = row[j] * scale
        row[j] = v
        m = v if v > m else m  # a NaN is passed over here and comes through the subtraction below
    if m == NEG_INF:  # attends nowhere: weights 0, as PyTorch's attention (a NaN score is not -inf)
        nan = False
        for j in range(n):
            nan = nan or row[j] != row[j]
        if not nan:
            for j in range(width):
                row[j] = ZERO
            return
    t = ZERO
    for j in range(n):
        d = row[j] - m
        e = _exp32(d)
        e = ZERO if d < EXP_FLOOR else e
        row[j] = e
        t += e
    for j in range(n):
        row[j] = row[j] / t
    for j in range(n, width):
        row[j] = ZERO


@njit(inline="always")
def _entry_at(a, b, h):
    # the address of entry (b, h) of a (B, H, ...) array
    return a.ctypes.data + a.strides[0] * b + a.strides[1] * h


def softmax_rows(s, causal):
    # s (R, L, S), C-contiguous, becomes softmax(s) over its last axis; with `causal`, row i attends to
    # columns 0..i only (PyTorch's top-left aligned is_causal) and the rest get weight 0
    R, L, S = s.shape
    one = np.float32(1.0)  # (a product by 1 is exact: the scores as they are)
    for r in range(R):
        for i in range(L):
            _softmax_row(s[r, i], i, S, causal, one)


def attention_entries(drv, ukr, tr, q, k, v, p, out, scale, causal, lo, hi):
    # attention for the (batch, head) entries [lo, hi) of q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), each
    # with a contiguous last axis, into p (B*H, L, S) (C-contiguous: the weights, kept for the backward) and out
    # (B, H, L, Ev): per entry the scores q k^T on the GEMM driver, each row's softmax of scores * scale while
    # the entry's scores are in cache, then p v on the driver
    H, L, E = q.shape[1], q.shape[2], q.shape[3]
    S, Ev = k.shape[2], v.shape[3]
    sc = np.float32(scale)
    for r in range(lo, hi):
        b = r // H
        h = r - b * H
        qa = _entry_at(q, b, h)
        ka = _entry_at(k, b, h)
        va = _entry_at(v, b, h)
        oa = _entry_at(out, b, h)
        pa = p.ctypes.data + p.strides[0] * r
        # scores (L, S) = q (L, E) @ k^T (E, S): k's rows are k^T's columns
        call_driver(drv, ukr, tr, qa, 0, q.strides[2] // 4, 1, ka, 0, 1, k.strides[2] // 4, pa, 0, S, E, 0, 0, 0, 1,
                    0, L, 0, S)
        pr = carray(float32_at(pa), (L, S))  # C-contiguous rows, also where the pool passes p as any layout
        for i in range(L):
            _softmax_row(pr[i], i, S, causal, sc)
        # out (L, Ev) = p (L, S) @ v (S, Ev)
        call_driver(drv, ukr, tr, pa, 0, S, 1, va, 0, v.strides[2] // 4, 1, oa, 0, out.strides[2] // 4, S, 0, 0, 0,
                    1, 0, L, 0, Ev)


def attention_backward_entries(drv, ukr, tr, q, k, v, p, g, dq, dk, dv, scale, lo, hi):
    # attention's gradients for the (batch, head) entries [lo, hi), with attention_entries' layouts: g (the output's
    # gradient) like out, dq, dk, dv like q, k, v, p the weights (B*H, L, S). Per entry on the GEMM driver: dv = p^T g,
    # dp = g v^T (into a scratch block of the chunk), each row of dp becoming the scores' gradient times scale
    # (softmax_grad_rows' rule) while in cache, then dq = ds k and dk = ds^T q; p^T and ds^T are read in place
    H, L, E = q.shape[1], q.shape[2], q.shape[3]
    S, Ev = k.shape[2], v.shape[3]
    sc = np.float32(scale)
    ds = np.empty((L, S), np.float32)
    da = ds.ctypes.data
    for r in range(lo, hi):
        b = r // H
        h = r - b * H
        qa = _entry_at(q, b, h)
        ka = _entry_at(k, b, h)
        va = _entry_at(v, b, h)
        ga = _entry_at(g, b, h)
        dqa = _entry_at(dq, b, h)
        dka = _entry_at(dk, b, h)
        dva = _entry_at(dv, b, h)
        pa = p.ctypes.data + p.strides[0] * r
        # dv (S, Ev) = p^T (S, L) @ g (L, Ev): p^T's rows are p's columns
        call_driver(drv, ukr, tr, pa, 0, 1, S, ga, 0, g.strides[2] // 4, 1, dva, 0, dv.strides[2] // 4, L, 0, 0, 0, 1,
                    0, S, 0, Ev)
        # dp (L, S) = g (L, Ev) @ v^T (Ev, S)
        call_driver(drv, ukr, tr, ga, 0, g.strides[2] // 4, 1, va, 0, 1, v.strides[2] // 4, da, 0, S, Ev, 0, 0, 0, 1,
                    0, L, 0, S)
        pr = carray(float32_at(pa), (L, S))  # as in attention_entries
        for i in range(L):
            a = ds[i]
            w = pr[i]
            t = ZERO
            for j in range(S):
                t += a[j] * w[j]
            for j in range(S):
                a[j] = (a[j] - t) * w[j] * sc
        # dq (L, E) = ds (L, S) @ k (S, E)
        call_driver(drv, ukr, tr, da, 0, S, 1, ka, 0, k.strides[2] // 4, 1, dqa, 0, dq.strides[2] // 4, S, 0, 0, 0, 1,
                    0, L, 0, E)
        # dk (S, E) = ds^T (S, L) @ q (L, E)
        call_driver(drv, ukr, tr, da, 0, 1, S, qa, 0, q.strides[2] // 4, 1, dka, 0, dk.strides[2] // 4, L, 0, 0, 0, 1,
                    0, S, 0, E)


def softmax_grad_rows(dp, p):
    # dp (R, L, S), the gradient of the weights p, becomes the scores' gradient p * (dp - sum(dp * p)) per row
    R, L, S = dp.shape
    for r in range(R):
        for i in range(L):
            a = dp[r, i]
            b = p[r, i]
            t = ZERO
            for j in range(S):
                t += a[j] * b[j]
            for j in range(S):
                a[j] = (a[j] - t) * b[j]
'''


ATTENTION = Table("scaled_dot_product_attention", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to "
                  "Haswell kernels, 2026-11-27", values={
    "split_min_scores": (1 << 16, "attention is independent per batch index, and its many small GEMMs and softmax "
                                  "passes run on one core: from this many score values the first batch axis is split "
                                  "over the threads (a (16, 4, 64, 64) causal transformer's: 1.09 -> 0.71 ms)"),
})
algorithms("scaled_dot_product_attention", [
    Algorithm("one compiled kernel", "float32 with no mask, 3 or 4 dims with contiguous last axes, 16384+ score values, "
              "Ember's GEMM driver here: per (batch, head) entry the scores, their softmax and the product with V in "
              "one kernel, the entries split over the threads", None),
    Algorithm("GEMMs + compiled softmax rows", "float32, 16384+ score values, Numba: the scores' softmax in one pass a "
              "row; the batch split from split_min_scores", None),
    Algorithm("numpy", "otherwise: NumPy's GEMMs and softmax", always),
])
algorithms("scaled_dot_product_attention_backward", [
    Algorithm("one compiled kernel", "as the forward's one kernel (the output's gradient with a contiguous last axis "
              "too): per (batch, head) entry the four GEMMs and the softmax's gradient in one kernel, the entries split "
              "over the threads", None),
    Algorithm("GEMMs + compiled softmax rows", "float32, 16384+ score values, Numba: the softmax's gradient in one "
              "pass a row; the batch split from split_min_scores", None),
    Algorithm("numpy", "otherwise: NumPy's GEMMs and softmax", always),
])


def kernel(name: str, xp, dtype, elements: int):
    """The compiled `softmax_rows` or `softmax_grad_rows` for float32 scores of `elements` values, or None."""
    if dtype != np.float32:
        return None
    # reassoc: the row sums vectorise (several partial sums); contract: exp's multiply-adds fuse
    fn = kernel_for(_SOURCE, name, xp, dtype, elements, fastmath={"reassoc", "contract"})
    if fn is not None:
        note("scaled_dot_product_attention" + ("_backward" if name == "softmax_grad_rows" else ""),
             "GEMMs + compiled softmax rows")
    return fn


def entries(xp, q, k, v, p, out, scale: float, causal: bool) -> bool:
    """Attention's forward as one compiled kernel over the (batch, head) entries (attention_entries), split over the
    threads: out = softmax(q k^T * scale) v and the weights into p (C-contiguous, q's shape but S last). True where it
    ran; False, with nothing written, where its rule does not hold (`_driven`)."""
    ready = _driven(xp, "attention_entries", (q, k, v, out), p)
    if ready is None:
        return False
    fn, drv, (q, k, v, out) = ready
    entries_, (L, E), (S, Ev) = q.shape[0] * q.shape[1], q.shape[2:], v.shape[2:]
    note("scaled_dot_product_attention", "one compiled kernel")
    _run_entries(fn, drv, entries_, 2.0 * entries_ * L * S * (E + Ev),
                 (q, k, v, p.reshape(entries_, L, S), out, float(scale), bool(causal)))
    return True


def backward_entries(xp, q, k, v, p, g, dq, dk, dv, scale: float) -> bool:
    """Attention's gradients as one compiled kernel over the (batch, head) entries (attention_backward_entries), split
    over the threads: dq, dk, dv (laid out like q, k, v) from the weights p (C-contiguous) and the output's gradient g.
    True where it ran; False, with nothing written, where its rule does not hold (`_driven`)."""
    ready = _driven(xp, "attention_backward_entries", (q, k, v, g, dq, dk, dv), p)
    if ready is None:
        return False
    fn, drv, (q, k, v, g, dq, dk, dv) = ready
    entries_, (L, E), (S, Ev) = q.shape[0] * q.shape[1], q.shape[2:], v.shape[2:]
    note("scaled_dot_product_attention_backward", "one compiled kernel")
    _run_entries(fn, drv, entries_, 4.0 * entries_ * L * S * (E + Ev),
                 (q, k, v, np.ascontiguousarray(p).reshape(entries_, L, S), g, dq, dk, dv, float(scale)))
    return True


def _driven(xp, name: str, arrays: tuple, p):
    """(compiled kernel `name`, the GEMM driver's address, `arrays` with a leading batch axis) where the one-kernel
    rule holds: float32 NumPy arrays of 3 or 4 dims, last axes contiguous, whole-value strides, 16384+ score values
    (p's), Numba and Ember's GEMM driver here; else None."""
    if xp is not np or p.size < MIN_ELEMENTS or p.dtype != np.float32 or arrays[0].ndim not in (3, 4):
        return None
    for a in arrays:
        if a.dtype != np.float32 or a.strides[-1] != 4 or any(st % 4 for st in a.strides) or 0 in a.shape:
            return None
    from ember.kernels import gemm, sgemm

    if not gemm.driver_enabled():
        return None
    fn = kernel_for(_SOURCE, name, xp, np.dtype(np.float32), p.size, fastmath={"reassoc", "contract"})
    drv = sgemm.driver_address() if fn is not None else 0
    if not drv:
        return None
    return fn, drv, tuple(a[None] for a in arrays) if arrays[0].ndim == 3 else arrays


def _run_entries(fn, drv, entries_: int, flops: float, args: tuple) -> None:
    """fn(driver, micro-kernel, transposing copy, *args, lo, hi) over the entries, split over the threads."""
    from ember.kernels.sgemm_microkernel import microkernel_address, transpose_address

    parts = parallel.chunks(entries_, flops, compiled=True)
    parallel.run_kernel(fn, parts, (drv, microkernel_address(), transpose_address()) + args, strided=True)


def by_batch(xp, work, shape, scores: int) -> None:
    """work(a, b) for chunks a:b of the first batch axis of `shape` (the whole when there is none; a GPU's kernels
    are queued from one thread), split over the threads from split_min_scores score values."""
    if len(shape) < 3 or xp is not np:
        work(0, None)
    elif scores >= ATTENTION["split_min_scores"]:
        parallel.parallel_for(shape[0], work)
    else:
        work(0, shape[0])


def rows(a: np.ndarray) -> np.ndarray:
    """A C-contiguous (..., L, S) array as the (R, L, S) view the kernels take."""
    return a.reshape((-1,) + a.shape[-2:])
