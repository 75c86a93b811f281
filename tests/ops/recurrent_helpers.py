"""Comparing a recurrent layer's compiled time loop with its per-step path (test_lstm_layer, test_gru_layer)."""

from __future__ import annotations

import numpy as np

from ember.kernels import blas, parallel


def loop_vs_steps_check(batch: int, gates: int, hidden: int):
    """assert(looped, stepped) for a layer of `gates` * `hidden` gate rows over `batch` samples. Where a thread's
    rows fit one small-matrix GEMM call both paths run the same BLAS kernel, so they are equal bit for bit; split
    into several calls (blas.sgemm_rows) the backward's sums over K = gates * hidden round differently. So do
    they where OpenBLAS's kernels round a row by where it falls in the call (its Haswell kernels, which
    OPENBLAS_CORETYPE=Haswell forces on AVX-512 machines, have no small-matrix kernels)."""
    split = -(-batch // parallel.get_num_threads()) * gates * hidden * hidden > blas.SMALL_GEMM_MAX
    exact = not split and _rows_round_alike(batch, gates * hidden, hidden)

    def same(looped, stepped):
        if exact:
            np.testing.assert_array_equal(looped, stepped)
        else:
            np.testing.assert_allclose(looped, stepped, rtol=1e-5, atol=1e-5 * np.abs(stepped).max())

    return same


def _rows_round_alike(m: int, n: int, k: int) -> bool:
    """Whether NumPy's BLAS gives a product's rows the same bits when its rows are split over two calls (both
    shapes of a layer's GEMMs: (m, k) @ (k, n) and (m, n) @ (n, k))."""
    rng = np.random.default_rng(0)
    for kk, nn in ((k, n), (n, k)):
        a = rng.standard_normal((m, kk)).astype(np.float32)
        b = rng.standard_normal((kk, nn)).astype(np.float32)
        if not np.array_equal(a @ b, np.concatenate([a[: m // 2] @ b, a[m // 2:] @ b])):
            return False
    return True
