"""Fixtures of the kernel-layer tests: two threads, and splits at any size."""

from __future__ import annotations

import pytest

from ember.kernels import blas, parallel


@pytest.fixture
def two_threads():
    """Two threads for every split (restored after); skipped where BLAS's threads cannot be held or one core."""
    if not blas.controllable() or parallel.cores() < 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here, or one core")
    before = parallel.get_num_threads()
    parallel.set_num_threads(2)
    yield
    parallel.set_num_threads(before)


@pytest.fixture
def split_everything(two_threads, thresholds):
    """Two threads, and every range split however little work it holds."""
    thresholds(parallel.THRESHOLDS, min_python_chunk_flops=0, min_kernel_chunk_flops=0)

