"""`ember.scipy.stats.multivariate_normal`: the normal distribution with mean `mean` and covariance `cov`."""

from __future__ import annotations

import math

from ember import linalg as _la
from ember import ops as _ops
from ember.scipy._args import as_floats, numpy_api

_LOG_2PI = math.log(2 * math.pi)


def _cov(cov, d: int):
    """cov as a (d, d) matrix (a number or a vector of variances is diagonal, as in SciPy)."""
    if cov.ndim == 0:
        cov = _ops.expand(cov, (d,))
    if cov.ndim == 1:
        from ember.ops.creation_ops import eye_like

        return _ops.unsqueeze(cov, -1) * eye_like(cov, d)
    return cov


def logpdf(x, mean=None, cov=1.0, allow_singular: bool = False):
    """log density of each row of x (the last axis holds the d coordinates; a number is one coordinate)."""
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True is not supported; "
                                  "give a positive-definite covariance")
    x, mean, cov = as_floats(x, 0.0 if mean is None else mean, cov)
    scalar = x.ndim == 0
    if scalar:
        x = _ops.reshape(x, (1,))
    d = x.shape[-1]
    chol = _la.cholesky(_cov(cov, d))
    z = _la.solve(chol, _ops.unsqueeze(x - mean, -1))  # L^{-1} (x - mean)
    maha = _ops.sum(z * z, (-2, -1))
    logdet = 2.0 * _ops.sum(_ops.log(_ops.diagonal(chol, 0, -2, -1)), -1)
    out = -0.5 * (d * _LOG_2PI + logdet + maha)
    return _ops.reshape(out, ()) if scalar else out


def pdf(x, mean=None, cov=1.0, allow_singular: bool = False):
    """density of each row of x."""
    return _ops.exp(logpdf(x, mean, cov, allow_singular))


def entropy(mean=None, cov=1.0):
    """differential entropy: (d/2) (1 + log 2 pi) + log det(cov) / 2."""
    (cov,) = as_floats(cov)
    d = 1 if cov.ndim == 0 else cov.shape[-1]
    cov = _cov(cov, d)
    return 0.5 * d * (1.0 + _LOG_2PI) + 0.5 * _la.slogdet(cov).logabsdet


numpy_api(globals(), __name__)
