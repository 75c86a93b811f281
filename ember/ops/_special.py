"""Special functions NumPy lacks (erf), with SciPy/CuPy used when present."""

from __future__ import annotations

import math

import numpy as np

try:
    from scipy.special import erf as _scipy_erf
except ImportError:  # SciPy is optional
    _scipy_erf = None

_math_erf = np.frompyfunc(math.erf, 1, 1)


def erf(xp, x):
    """The error function, exact in float64 and to float32 rounding otherwise."""
    if xp is not np:
        from cupyx.scipy.special import erf as cupy_erf

        return cupy_erf(x)
    if _scipy_erf is not None:
        return _scipy_erf(x).astype(x.dtype, copy=False)
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    # Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): enough below float64.
    xf = x.astype(np.float64)
    s = np.sign(xf)
    a = np.abs(xf)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (s * (1.0 - poly * np.exp(-a * a))).astype(x.dtype)
