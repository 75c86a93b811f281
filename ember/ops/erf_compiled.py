"""float32 erf as compiled loops (Numba) when the `jit` extra is installed (GELU's are in gelu_compiled.py).

The NumPy evaluation in _special.py makes about forty passes over the data (one per polynomial term),
which took 4 ms for a transformer's 0.5 M activations. These loops make one pass for the
exponent, NumPy's vectorised exp over it, and one pass for the rest, with the same float32 operations
in the same order (no contraction into FMAs, no reassociation), so they give the NumPy path's values
bit for bit. exp stays NumPy's: without Intel's SVML, Numba calls the scalar libm exp per element.
"""

from __future__ import annotations

import numpy as np

from ember.ops import batch_threads
from ember.ops._special import _ERF_P, _ERFCX_Q
from ember.ops.compiled import contiguous, kernel_for

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


# Blocks of 64 K values keep the exponent buffer and each block's slices in cache between the three passes;
# arrays of 256 K values or more are also split over the batch threads.
_BLOCK = 1 << 16
_SPLIT_MIN = 1 << 18


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

    batch_threads.run_if(work, out.size, out.size >= _SPLIT_MIN)
    return out.reshape(shape)


def erf_compiled(xp, x):
    """erf of float32 `x`, or None to use NumPy."""
    fns = _kernels(xp, x)
    return None if fns is None else _blocked(fns, contiguous(x), x.shape)
