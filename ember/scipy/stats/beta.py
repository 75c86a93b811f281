"""`ember.scipy.stats.beta`: the beta distribution with shapes a and b on [loc, loc + scale]."""

from __future__ import annotations

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api


def logpdf(x, a, b, loc=0.0, scale=1.0):
    """log density: (a-1) log z + (b-1) log(1-z) - log B(a, b) - log(scale) inside (0, 1); -inf outside."""
    x, a, b, loc, scale = as_floats(x, a, b, loc, scale)
    z = (x - loc) / scale
    inside = _ops.logical_and(_ops.gt(z, 0), _ops.lt(z, 1))
    safe = _ops.where(inside, z, 0.5)
    log_beta = _sp.gammaln(a) + _sp.gammaln(b) - _sp.gammaln(a + b)
    value = _sp.xlogy(a - 1.0, safe) + _sp.xlog1py(b - 1.0, -safe) - log_beta - _ops.log(scale)
    return _ops.where(inside, value, float("-inf"))


def pdf(x, a, b, loc=0.0, scale=1.0):
    """density."""
    return _ops.exp(logpdf(x, a, b, loc, scale))


numpy_api(globals(), __name__)
