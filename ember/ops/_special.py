"""Special functions NumPy lacks (erf): vectorised in float32, SciPy/CuPy (or math.erf) in float64."""

from __future__ import annotations

import math

import numpy as np

try:
    from scipy.special import erf as _scipy_erf
except ImportError:  # SciPy is optional
    _scipy_erf = None

_math_erf = np.frompyfunc(math.erf, 1, 1)

# Minimax fits (weighted least squares for relative error, fitted in float64 against SciPy): on |x| < 1,
# erf(x) = x * P(x^2) (relative error 1.2e-9); on [1, 4], erfc(x) = exp(-x^2) * Q(1 / (1 + x/2)) (2.7e-8).
# Beyond 4, erfc < 1.6e-8 and erf rounds to +-1 in float32, so |x| is capped there (which also sends
# inf to +-1; NaN stays NaN through every step).
_ERF_P = (7.8542213528331499e-05, -8.0103113763946299e-04, 5.1883425131073330e-03, -2.6853820906446460e-02,
          1.1283585412697331e-01, -3.7612625857538745e-01, 1.1283791657386324e+00)
_ERFCX_Q = (-0.0590784675632904, -0.04083483074687827, 0.38357496578636713, 0.11438370197228526,
            0.3261220780833322, 0.2745127121562837, 0.00053659564302803)


def _horner(coefs, v):
    """The polynomial with `coefs` (highest power first) at v, in v's dtype, in place on one buffer."""
    out = np.full_like(v, coefs[0])
    for c in coefs[1:]:
        out *= v
        out += v.dtype.type(c)
    return out


def _erf_float32(x):
    """erf of a float32 array in float32, vectorised (SciPy's scalar loop is several times slower).

    Both branches are computed over the whole array and np.where picks, since boolean gathers cost more
    than the arithmetic they would save.
    """
    if x.ndim == 0:  # NumPy makes 0-d results scalars, which the in-place steps below cannot write into
        return _erf_float32(x.reshape(1)).reshape(())
    a = np.minimum(np.abs(x), np.float32(4))
    sq = x * x
    inner = _horner(_ERF_P, sq)
    inner *= x
    t = a * np.float32(0.5)
    t += np.float32(1)
    np.reciprocal(t, out=t)
    erfc = _horner(_ERFCX_Q, t)
    np.minimum(sq, np.float32(16), out=sq)
    np.negative(sq, out=sq)
    erfc *= np.exp(sq, out=sq)
    np.subtract(np.float32(1), erfc, out=erfc)
    np.copysign(erfc, x, out=erfc)
    return np.where(a < 1, inner, erfc)


def erf(xp, x):
    """The error function, exact in float64 and to float32 rounding otherwise."""
    if xp is not np:
        from cupyx.scipy.special import erf as cupy_erf

        return cupy_erf(x)
    if x.dtype == np.float32:
        from ember.ops.erf_compiled import erf_compiled  # the same values in two passes, with the jit extra

        out = erf_compiled(xp, x)
        return _erf_float32(x) if out is None else out
    if _scipy_erf is not None:
        return _scipy_erf(x).astype(x.dtype, copy=False)
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    return _erf_float32(x.astype(np.float32)).astype(x.dtype)
