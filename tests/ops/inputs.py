"""Seeded random inputs for op tests: shapes, broadcastable shape groups and values kept away from kinks."""

from __future__ import annotations

import zlib

import numpy as np

try:  # NumPy knows the name "bfloat16" once ml_dtypes is imported (import ember does not import it)
    import ml_dtypes  # noqa: F401
except ImportError:  # pragma: no cover - a test dependency
    pass


def seed_for(name: str, k: int = 0) -> int:
    """A stable seed per (test name, repetition), so a failure reproduces exactly."""
    return zlib.crc32(f"{name}/{k}".encode())


class Rand:
    """Draws shapes and arrays for one test case; `small` keeps them tiny for finite differences."""

    def __init__(self, seed: int, dtype="float32", small: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = np.dtype(dtype)
        self.small = small

    # --- shapes -----------------------------------------------------------------------
    def size(self, lo: int = 1, hi: int = 5) -> int:
        """One dimension length in [lo, hi] (hi capped at 3 for small cases)."""
        if self.small:
            hi = max(lo, min(hi, 3))
        return int(self.rng.integers(lo, hi + 1))

    def shape(self, min_ndim: int = 0, max_ndim: int = 3, min_size: int = 1, max_size: int = 5) -> tuple:
        """A random shape with min_ndim..max_ndim dims of min_size..max_size each."""
        if self.small:
            max_ndim = max(min_ndim, min(max_ndim, 3))
        ndim = int(self.rng.integers(min_ndim, max_ndim + 1))
        return tuple(self.size(min_size, max_size) for _ in range(ndim))

    def bshapes(self, n: int = 2, min_ndim: int = 0, max_ndim: int = 4) -> list:
        """n mutually broadcastable shapes: leading dims dropped and dims set to 1 at random."""
        full = self.shape(min_ndim, max_ndim, 1, 4)
        out = []
        for _ in range(n):
            drop = int(self.rng.integers(0, len(full) + 1))
            s = [1 if self.rng.random() < 0.3 else d for d in full[drop:]]
            out.append(tuple(s))
        # Make sure the group really broadcasts to `full` in at least one operand.
        out[int(self.rng.integers(0, n))] = full
        return out

    def choice(self, options):
        """One of `options`."""
        return options[int(self.rng.integers(0, len(options)))]

    # --- values -------------------------------------------------------------------------
    def _cast(self, a, dtype=None) -> np.ndarray:
        return np.asarray(a, dtype=self.dtype if dtype is None else dtype)

    def normal(self, shape, scale: float = 1.0, dtype=None) -> np.ndarray:
        """Standard-normal values times `scale`."""
        return self._cast(self.rng.standard_normal(shape) * scale, dtype)

    def uniform(self, shape, lo: float, hi: float, dtype=None) -> np.ndarray:
        """Uniform values in [lo, hi)."""
        return self._cast(self.rng.uniform(lo, hi, shape), dtype)

    def positive(self, shape, lo: float = 0.2, hi: float = 3.0) -> np.ndarray:
        """Values in [lo, hi): a safe domain for log, sqrt, pow with a real exponent."""
        return self.uniform(shape, lo, hi)

    def offset(self, shape, at: float = 300.0, scale: float = 1.0) -> np.ndarray:
        """Normal values around `at`: large values with a small spread (their sums overflow float16)."""
        return self._cast(at + self.rng.standard_normal(shape) * scale)

    def away(self, shape, gap: float = 0.2, hi: float = 2.0, at: float = 0.0) -> np.ndarray:
        """Values of either sign at least `gap` away from `at` (abs, relu, sign, clamp kinks)."""
        mag = self.rng.uniform(gap, hi, shape)
        sign = np.where(self.rng.random(shape) < 0.5, -1.0, 1.0)
        return self._cast(at + sign * mag)

    def distinct(self, shape, spacing: float = 0.1) -> np.ndarray:
        """All-different values at least `spacing` apart (no ties for max, sort, topk)."""
        n = int(np.prod(shape, dtype=np.int64))
        vals = (self.rng.permutation(n) - n / 2) * spacing + self.rng.uniform(0, spacing / 4)
        return self._cast(vals.reshape(shape))

    def ints(self, shape, lo: int, hi: int, dtype="int64") -> np.ndarray:
        """Integers in [lo, hi)."""
        return self.rng.integers(lo, hi, shape).astype(dtype)

    def nonzero_ints(self, shape, lo: int, hi: int, dtype="int64") -> np.ndarray:
        """Integers in [lo, hi) other than 0 (divisors)."""
        a = self.ints(shape, lo, hi, dtype)
        return np.where(a == 0, 1, a).astype(dtype)

    def bools(self, shape, p: float = 0.5) -> np.ndarray:
        """Random booleans, true with probability p."""
        return self.rng.random(shape) < p

    def index(self, shape, size: int) -> np.ndarray:
        """int64 indices in [-size, size) (negative ones count from the end)."""
        return self.ints(shape, -size, size)

    def perm(self, n: int) -> np.ndarray:
        """A random permutation of range(n) as int64."""
        return self.rng.permutation(n).astype(np.int64)
