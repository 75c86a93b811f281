"""Fused multiply-add, a * b + c rounded once, on NumPy arrays (NumPy has no fma ufunc).

PyTorch's CPU kernels are compiled with FMA contraction, so its uniform_(a, b) and normal_(mean, std)
round x * (b - a) + a once; matching its values bit for bit needs the same single rounding.
float32: the product is exact in float64, and the float64 sum is rounded to odd before the rounding to
float32, which makes the two roundings one (Boldo and Melquiond, "Emulation of FMA and correctly
rounded sums: proved algorithms using rounding to odd", IEEE TC 2008). float64: the product is split
exactly (Dekker) and the three-term sum rounded with the same rounding-to-odd step.
"""

from __future__ import annotations

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's split of a float64 into two 26-bit halves


def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e == a + b exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_product(a, b):
    """(p, e) with p = fl(a * b) and p + e == a * b exactly (Dekker)."""
    p = a * b
    t = a * _SPLITTER
    ah = t - (t - a)
    al = a - ah
    t = b * _SPLITTER
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _to_odd(s, err):
    """s, moved to its odd neighbour toward s + err where s is inexact and even: s + err rounded to odd."""
    s = np.array(s, dtype=np.float64, copy=True)
    fix = (err != 0) & np.isfinite(s)
    if fix.any():
        bits = s.view(np.int64)
        fix &= (bits & 1) == 0
        step = np.where((err > 0) == (s > 0), 1, -1)
        bits += np.where(fix, step, 0)
    return s


def fma32(a, b, c) -> np.ndarray:
    """float32 a * b + c with one rounding (a, b, c float32 arrays or scalars)."""
    s = np.multiply(a, b, dtype=np.float64)  # exact: 24 + 24 bits
    s += c
    # Rounding the float64 sum to float32 can differ from one rounding only where the sum lies exactly
    # halfway between two float32 values (its 29 low mantissa bits 100...0) or is tiny (float32's
    # subnormals round at other bits): there, redo it rounded to odd.
    bits = s.view(np.uint64)
    suspect = (bits & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)
    suspect |= np.abs(s) < 2.0**-125
    if suspect.any():
        at = np.nonzero(suspect)
        p = np.multiply(np.broadcast_to(a, s.shape)[at], np.broadcast_to(b, s.shape)[at], dtype=np.float64)
        s[at] = _to_odd(*_two_sum(p, np.broadcast_to(np.asarray(c, dtype=np.float64), s.shape)[at]))
    return s.astype(np.float32)


def fma64(a, b, c) -> np.ndarray:
    """float64 a * b + c with one rounding."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    ph, pl = _two_product(a, b)
    uh, ul = _two_sum(c, pl)
    th, tl = _two_sum(ph, uh)
    v, verr = _two_sum(tl, ul)
    return th + _to_odd(v, verr)
