"""Special functions NumPy lacks (erf): vectorised in float32, SciPy/CuPy (or math.erf) in float64."""

from __future__ import annotations

import math

import numpy as np

from ember.kernels.erf import _ERF_P, _ERFCX_Q  # the fits the compiled erf uses too

_math_erf = np.frompyfunc(math.erf, 1, 1)
_scipy: list = []


def _scipy_erf():
    """SciPy's erf, or None without SciPy (imported at the first float64 erf: importing scipy.special takes a
    quarter of a second, which `import ember` should not pay)."""
    if not _scipy:
        try:
            from scipy.special import erf
        except ImportError:  # SciPy is optional
            erf = None
        _scipy.append(erf)
    return _scipy[0]


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
        from ember.kernels.erf import erf_compiled  # the same values in two passes, with the jit extra

        out = erf_compiled(xp, x)
        return _erf_float32(x) if out is None else out
    scipy_erf = _scipy_erf()
    if scipy_erf is not None:
        return scipy_erf(x).astype(x.dtype, copy=False)
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    return _erf_float32(x.astype(np.float32)).astype(x.dtype)
