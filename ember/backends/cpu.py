"""The CPU backend: NumPy arrays. Logical devices cpu:N share the code but not the data."""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

from ember.backends.base import Backend

_generator = np.random.default_rng()


def _keep_freed_blocks_for_reuse() -> bool:
    """Ask glibc to keep large freed blocks in the heap instead of unmapping them.

    By default glibc serves arrays above 128 KiB with fresh mmaps and unmaps them when freed, so
    every training step page-faults its activations and gradients in again. Raising the mmap and
    trim thresholds (to glibc's 32 MiB maximum) lets freed blocks be reused, which is what a
    caching allocator buys. Set EMBER_MALLOC_CACHE=0 to leave malloc alone.
    """
    if os.environ.get("EMBER_MALLOC_CACHE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) == 1
        return bool(libc.mallopt(m_trim_threshold, 256 << 20) == 1 and ok)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False


MALLOC_CACHE = _keep_freed_blocks_for_reuse()


class CPUBackend(Backend):
    """NumPy arrays on the host."""

    xp = np
    direct = True

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array) -> np.ndarray:
        return array

    def run(self, kernel, arrays, attrs):
        return kernel(np, *arrays, **attrs)

    def manual_seed(self, seed: int) -> None:
        global _generator
        _generator = np.random.default_rng(seed)

    def random(self) -> np.random.Generator:
        return _generator
