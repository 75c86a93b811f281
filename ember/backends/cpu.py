"""The CPU backend: NumPy arrays. Logical devices cpu:N share the code but not the data."""

from __future__ import annotations

import numpy as np

from ember.backends.base import Backend

_generator = np.random.default_rng()


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
