"""The interface every backend implements."""

from __future__ import annotations

import numpy as np


class Backend:
    """A copy of NumPy for one device: array module, allocation, host copies, sync.

    `abstract` backends hold no data (meta); ops there run only their shape rule.
    """

    abstract = False
    direct = False  # kernels can be called with NumPy directly (no device context)
    xp = None  # the NumPy-compatible array module

    def __init__(self, device) -> None:
        self.device = device

    # --- allocation and copies -------------------------------------------------
    def from_host(self, array: np.ndarray):
        """Copy (or adopt, on the CPU) a host array onto this device."""
        raise NotImplementedError

    def to_host(self, array) -> np.ndarray:
        """A host NumPy array with the same values (shares memory on the CPU)."""
        raise NotImplementedError

    def empty(self, shape: tuple, np_dtype):
        """Uninitialised storage."""
        return self.xp.empty(shape, dtype=np_dtype)

    def full(self, shape: tuple, value, np_dtype):
        """Storage filled with one value."""
        return self.xp.full(shape, value, dtype=np_dtype)

    def run(self, kernel, arrays, attrs):
        """Run one kernel on this device's arrays."""
        return kernel(self.xp, *arrays, **attrs)

    def synchronize(self) -> None:
        """Wait for queued work (a no-op for synchronous backends)."""

    # --- randomness ---------------------------------------------------------------
    def manual_seed(self, seed: int) -> None:
        """Seed this device's random generator."""

    def random(self):
        """This device's draws: an object with ember.Generator's `uniform`, `normal`, `integers`, `bernoulli`,
        `exponential` and `permutation` (host draws come from ember.Generator itself)."""
        raise NotImplementedError
