"""float32 erf as compiled loops (Numba) when the `jit` extra is installed (GELU's are in gelu.py).

The NumPy evaluation in _special.py makes about forty passes over the data (one per polynomial term),
which took 4 ms for a transformer's 0.5 M activations. These loops make one pass for the
exponent, NumPy's vectorised exp over it, and one pass for the rest, with the same float32 operations
in the same order (no contraction into FMAs, no reassociation), so they give the NumPy path's values
bit for bit. exp stays NumPy's: without Intel's SVML, Numba calls the scalar libm exp per element.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import parallel
from ember.kernels.numba_loader import contiguous, kernel_for
from ember.kernels.selection import Table, compiled_or_numpy, note

# Minimax fits (weighted least squares for relative error, fitted in float64 against SciPy): on |x| < 1,
# erf(x) = x * P(x^2) (relative error 1.2e-9); on [1, 4], erfc(x) = exp(-x^2) * Q(1 / (1 + x/2)) (2.7e-8).
# Beyond 4, erfc < 1.6e-8 and erf rounds to +-1 in float32, so |x| is capped there (which also sends
# inf to +-1; NaN stays NaN through every step).
_ERF_P = (7.8542213528331499e-05, -8.0103113763946299e-04, 5.1883425131073330e-03, -2.6853820906446460e-02,
          1.1283585412697331e-01, -3.7612625857538745e-01, 1.1283791657386324e+00)
_ERFCX_Q = (-0.0590784675632904, -0.04083483074687827, 0.38357496578636713, 0.11438370197228526,
            0.3261220780833322, 0.2745127121562837, 0.00053659564302803)


_COEFFICIENTS = "\n".join([f"P{k} = np.float32({c!r})" for k, c in enumerate(_ERF_P)]
                          + [f"Q{k} = np.float32({c!r})" for k, c in enumerate(_ERFCX_Q)])

_SOURCE = '''
import math

import numpy as np
from numba import njit

F1, HALF, FOUR, SIXTEEN = np.float32(1.0), np.float32(0.5), np.float32(4.0), np.float32(16.0)
''' + _COEFFICIENTS + '''


@njit(inline="always")
def _exp_arg(u):
    """-min(u*u, 16): the argument of exp in erfc(|u|)'s branch (NaN stays NaN)."""
    s = u * u
    return -(SIXTEEN if s > SIXTEEN else s)


@njit(inline="always")
def _erf(u, e):
    """erf(u) given e = exp(_exp_arg(u)): _special._erf_float32's steps, in its order."""
    a = abs(u)
    a = FOUR if a > FOUR else a
    sq = u * u
    inner = ((((((P0 * sq + P1) * sq + P2) * sq + P3) * sq + P4) * sq + P5) * sq + P6) * u
    t = F1 / (a * HALF + F1)
    erfc = ((((((Q0 * t + Q1) * t + Q2) * t + Q3) * t + Q4) * t + Q5) * t + Q6) * e
    return inner if a < F1 else math.copysign(F1 - erfc, u)


def erf_exp_args(x, e):
    for i in range(x.size):
        e[i] = _exp_arg(x[i])


def erf_finish(x, e, out):
    for i in range(x.size):
        out[i] = _erf(x[i], e[i])
'''


def _kernels(xp, x):
    """(exp-argument pass, finishing pass) for float32 `x`, or None to use NumPy."""
    if x.dtype != np.float32:
        return None
    first = kernel_for(_SOURCE, "erf_exp_args", xp, x.dtype, x.size)
    return None if first is None else (first, kernel_for(_SOURCE, "erf_finish", xp, x.dtype, x.size))


# Blocks of 64 K values keep the exponent buffer and each block's slices in cache between the three passes.
_BLOCK = 1 << 16
ERF = Table("erf", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27", values={
    "split_min": (1 << 18, "arrays of this many values or more are split over the threads"),
})
compiled_or_numpy("erf", "compiled passes", "float32, 16384+ values, Numba: the exponent arguments, NumPy's exp, the "
                  "rest, a 64K-value block at a time")


def _blocked(fns, x, shape):
    """The finishing kernel's output over flat `x`, block by block: exponent arguments, NumPy's exp over
    them, then the rest."""
    prepare, finish = fns
    out = np.empty(x.size, np.float32)

    def work(lo: int, hi: int) -> None:
        e = np.empty(min(_BLOCK, hi - lo), np.float32)
        for a in range(lo, hi, _BLOCK):
            b = min(hi, a + _BLOCK)
            eb = e[:b - a]
            prepare(x[a:b], eb)
            np.exp(eb, out=eb)
            finish(x[a:b], eb, out[a:b])

    parallel.parallel_for(out.size, work) if out.size >= ERF["split_min"] else work(0, out.size)
    return out.reshape(shape)


def erf_compiled(xp, x):
    """erf of float32 `x`, or None to use NumPy."""
    fns = _kernels(xp, x)
    if fns is None:
        return None
    note("erf", "compiled passes")
    return _blocked(fns, contiguous(x), x.shape)
