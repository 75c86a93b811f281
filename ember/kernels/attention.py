"""Attention's softmax and the softmax's gradient over score rows, one compiled pass each (float32, `jit` extra).

On NumPy the forward's softmax is five passes over the (..., L, S) scores (the causal mask's copy, the row
maxima, the subtraction, exp, the row sums and the division), and its gradient three (dP * P, the row sums, the
subtraction and product), each with its own temporary; at a transformer's (16, 4, 64, 64) causal scores they
took 0.6 ms of the forward's 0.75 on one core. Here each row is finished while it is in cache: the causal
block is skipped (its weights set to 0), and exp is exp_compiled's vectorised float32 exp, flushed to 0 below
e^-87 (< 2e-38, where NumPy's would give a subnormal). A NaN score makes its row NaN; a row that attends
nowhere (every score -inf) gets weights 0, as PyTorch's attention gives (its plain softmax gives NaN). Results differ from the NumPy path by float32 rounding
(this exp is within 1.2 float32 ulps on [-87, 0], NumPy's within 2.4; the sums are added in another order), which is why the path is chosen once per call
from the whole size, never per thread's chunk.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import exp, parallel
from ember.kernels.numba_loader import kernel_for
from ember.kernels.selection import Table, compiled_or_numpy, note

_SOURCE = exp.SOURCE + '''

ZERO = np.float32(0.0)
NEG_INF = np.float32(-np.inf)
EXP_FLOOR = np.float32(-87.0)  # exp_compiled's exp clamps below this; e^-87 < 2e-38


def softmax_rows(s, causal):
    # s (R, L, S), C-contiguous, becomes softmax(s) over its last axis; with `causal`, row i attends to
    # columns 0..i only (PyTorch's top-left aligned is_causal) and the rest get weight 0
    R, L, S = s.shape
    for r in range(R):
        for i in range(L):
            row = s[r, i]
            n = min(S, i + 1) if causal else S
            m = NEG_INF
            for j in range(n):
                v = row[j]
                m = v if v > m else m  # a NaN is passed over here and comes through the subtraction below
            if m == NEG_INF:  # attends nowhere: weights 0, as PyTorch's attention (a NaN score is not -inf)
                nan = False
                for j in range(n):
                    nan = nan or row[j] != row[j]
                if not nan:
                    for j in range(S):
                        row[j] = ZERO
                    continue
            t = ZERO
            for j in range(n):
                d = row[j] - m
                e = _exp32(d)
                e = ZERO if d < EXP_FLOOR else e
                row[j] = e
                t += e
            for j in range(n):
                row[j] = row[j] / t
            for j in range(n, S):
                row[j] = ZERO


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
for _op in ("scaled_dot_product_attention", "scaled_dot_product_attention_backward"):
    compiled_or_numpy(_op, "GEMMs + compiled softmax rows", "float32, 16384+ score values, Numba: the scores' softmax "
                      "(its gradient) in one pass a row; the batch split from split_min_scores",
                      "otherwise: NumPy's GEMMs and softmax")


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
