"""`ember.scipy.stats.norm`: the normal distribution N(loc, scale^2)."""

from __future__ import annotations

import math

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _z(x, loc, scale):
    x, loc, scale = as_floats(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0.0, scale=1.0):
    """log density: -z^2 / 2 - log(scale) - log(sqrt(2 pi)), z = (x - loc) / scale."""
    z, scale = _z(x, loc, scale)
    return -0.5 * z * z - _ops.log(scale) - _LOG_SQRT_2PI


def pdf(x, loc=0.0, scale=1.0):
    """density."""
    return _ops.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """distribution function."""
    return _sp.ndtr(_z(x, loc, scale)[0])


def logcdf(x, loc=0.0, scale=1.0):
    """log of the distribution function, accurate in the lower tail."""
    return _sp.log_ndtr(_z(x, loc, scale)[0])


def sf(x, loc=0.0, scale=1.0):
    """survival function 1 - cdf."""
    return _sp.ndtr(-_z(x, loc, scale)[0])


def logsf(x, loc=0.0, scale=1.0):
    """log of the survival function, accurate in the upper tail."""
    return _sp.log_ndtr(-_z(x, loc, scale)[0])


def ppf(q, loc=0.0, scale=1.0):
    """quantile function (the inverse of cdf)."""
    q, loc, scale = as_floats(q, loc, scale)
    return loc + scale * _sp.ndtri(q)


numpy_api(globals(), __name__)
