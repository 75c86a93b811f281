"""Large draws are made in chunks, in the result's dtype: randn(n) needs little memory beyond its result
(it used to draw float64 first, then cast: three times the result's size)."""

from __future__ import annotations

import tracemalloc

import pytest

import ember as em

N = 1 << 23  # 32 MB of float32: eight of the generator's chunks


@pytest.mark.parametrize("draw", [
    lambda: em.randn(N), lambda: em.rand(N), lambda: em.randn(N, dtype=em.float64),
    lambda: em.normal(0.5, 2.0, (N,)), lambda: em.empty(N).uniform_(-1, 1), lambda: em.randint(0, 10, (N,)),
], ids=["randn", "rand", "randn_float64", "normal", "uniform_", "randint"])
def test_a_large_draw_peaks_near_its_result_size(draw):
    em.randn(1 << 15), em.randn(1 << 15, dtype=em.float64)  # compile (or load) the kernels outside the measure
    tracemalloc.start()
    try:
        result = draw()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * result.numpy().nbytes
