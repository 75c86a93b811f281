"""float32 erf, exact GELU and GELU's gradient as compiled loops (Numba) when the `jit` extra is installed.

The NumPy evaluation in _special.py makes about forty passes over the data (one per polynomial term),
which took 4 ms per GELU of a transformer's 0.5 M activations. These loops make one pass for the
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
SQRT_2 = np.float32(math.sqrt(2.0))
INV_SQRT_2 = np.float32(1.0 / math.sqrt(2.0))
INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))
NEG_HALF = np.float32(-0.5)
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


def gelu_exp_args(x, e):
    for i in range(x.size):
        e[i] = _exp_arg(x[i] / SQRT_2)


def gelu_finish(x, e, out):
    for i in range(x.size):
        xi = x[i]
        out[i] = HALF * xi * (F1 + _erf(xi / SQRT_2, e[i]))


def gelu_backward_exp_args(x, e):
    n = x.size
    for i in range(n):
        xi = x[i]
        e[i] = _exp_arg(xi * INV_SQRT_2)
        e[n + i] = xi * NEG_HALF * xi


def gelu_backward_finish(g, x, e, out):
    n = x.size
    for i in range(n):
        xi = x[i]
        cdf = (_erf(xi * INV_SQRT_2, e[i]) + F1) * HALF
        out[i] = (cdf + e[n + i] * INV_SQRT_2PI * xi) * g[i]
'''


def _kernels(xp, x, prefix: str):
    """(exp-argument pass, finishing pass) for float32 `x`, or None to use NumPy."""
    if x.dtype != np.float32:
        return None
    first = kernel_for(_SOURCE, f"{prefix}_exp_args", xp, x.dtype, x.size)
    return None if first is None else (first, kernel_for(_SOURCE, f"{prefix}_finish", xp, x.dtype, x.size))


# Blocks of 64 K values keep the exponent buffer and each block's slices in cache between the three passes;
# arrays of 256 K values or more (a transformer's MLP activations) are also split over the batch threads.
_BLOCK = 1 << 16
_SPLIT_MIN = 1 << 18


def _blocked(fns, n_exp: int, arrays: list, shape):
    """The finishing kernel's output over flat `arrays` (x last), block by block: exponent arguments, NumPy's
    exp over them, then the rest."""
    prepare, finish = fns
    out = np.empty(arrays[-1].size, np.float32)

    def work(lo: int, hi: int) -> None:
        e = np.empty(n_exp * min(_BLOCK, hi - lo), np.float32)
        for a in range(lo, hi, _BLOCK):
            b = min(hi, a + _BLOCK)
            blocks = [arr[a:b] for arr in arrays]
            eb = e[:n_exp * (b - a)]
            prepare(blocks[-1], eb)
            np.exp(eb, out=eb)
            finish(*blocks, eb, out[a:b])

    batch_threads.run_if(work, out.size, out.size >= _SPLIT_MIN)
    return out.reshape(shape)



def erf_compiled(xp, x):
    """erf of float32 `x`, or None to use NumPy."""
    fns = _kernels(xp, x, "erf")
    return None if fns is None else _blocked(fns, 1, [contiguous(x)], x.shape)


def gelu_compiled(xp, x):
    """The exact GELU of float32 `x`, or None to use NumPy."""
    fns = _kernels(xp, x, "gelu")
    return None if fns is None else _blocked(fns, 1, [contiguous(x)], x.shape)


def gelu_backward_compiled(xp, g, x):
    """g * gelu'(x) for the exact GELU and float32 `g` and `x` of one shape, or None to use NumPy."""
    fns = _kernels(xp, x, "gelu_backward")
    if fns is None or g.dtype != np.float32:
        return None
    return _blocked(fns, 2, [contiguous(g), contiguous(x)], x.shape)
