"""Ember's draw interface over a NumPy-style `Generator` of an array module (CuPy's on CUDA).

Host draws come from `ember.Generator` (PyTorch's CPU streams); a device with its own generator offers
the same methods (`uniform`, `normal`, `integers`, `bernoulli`, `exponential`, `permutation`) through
this adapter, with that generator's streams.
"""

from __future__ import annotations

import numpy as np

_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))  # what the generators draw in directly


class ArrayDraws:
    """Draws from `rng` (an `xp.random.Generator`) as new arrays of the requested shape and dtype."""

    def __init__(self, rng) -> None:
        self.rng = rng

    def _floats(self, draw, shape, dtype):
        dtype = np.dtype(dtype)
        return draw(shape, dtype if dtype in _NATIVE else np.dtype(np.float32)).astype(dtype, copy=False)

    def uniform(self, shape, dtype=np.float32, low: float = 0.0, high: float = 1.0):
        """Uniform values in [low, high)."""
        u = self._floats(lambda s, d: self.rng.random(s, dtype=d), shape, dtype)
        return u * u.dtype.type(high - low) + u.dtype.type(low)

    def normal(self, shape, dtype=np.float32, mean: float = 0.0, std: float = 1.0):
        """Normal values."""
        z = self._floats(lambda s, d: self.rng.standard_normal(s, dtype=d), shape, dtype)
        return z * z.dtype.type(std) + z.dtype.type(mean)

    def integers(self, low: int, high: int, shape, dtype=np.int64):
        """Integers in [low, high)."""
        return self.rng.integers(int(low), int(high), size=shape).astype(dtype, copy=False)

    def bernoulli(self, p, shape, dtype=np.float32):
        """1 with probability p (a number or an array), else 0."""
        return (self.rng.random(shape) < p).astype(dtype)

    def exponential(self, shape, dtype=np.float32, lambd: float = 1.0):
        """Exponential values of rate lambd."""
        return self.rng.exponential(1.0 / lambd, size=shape).astype(dtype, copy=False)

    def permutation(self, n: int, dtype=np.int64):
        """A random permutation of 0..n-1."""
        return self.rng.permutation(int(n)).astype(dtype, copy=False)
