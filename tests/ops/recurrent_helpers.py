"""Comparing a recurrent layer's compiled time loop with its per-step path (test_lstm_layer, test_gru_layer)."""

from __future__ import annotations

import numpy as np

from ember.ops import batch_threads, cblas


def loop_vs_steps_check(batch: int, gates: int, hidden: int):
    """assert(looped, stepped) for a layer of `gates` * `hidden` gate rows over `batch` samples. Where a thread's
    rows fit one small-matrix GEMM call both paths run the same BLAS kernel, so they are equal bit for bit; split
    into several calls (cblas.sgemm_rows) the backward's sums over K = gates * hidden round differently."""
    split = -(-batch // batch_threads.workers()) * gates * hidden * hidden > cblas.SMALL_GEMM_MAX

    def same(looped, stepped):
        if split:
            np.testing.assert_allclose(looped, stepped, rtol=1e-5, atol=1e-5 * np.abs(stepped).max())
        else:
            np.testing.assert_array_equal(looped, stepped)

    return same
