"""`ember.scipy.stats.gamma`: the gamma distribution with shape a, shifted by loc and scaled."""

from __future__ import annotations

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api


def logpdf(x, a, loc=0.0, scale=1.0):
    """log density: (a-1) log z - z - lgamma(a) - log(scale) for z = (x - loc) / scale > 0; -inf below."""
    x, a, loc, scale = as_floats(x, a, loc, scale)
    z = (x - loc) / scale
    inside = _ops.gt(z, 0)
    safe = _ops.where(inside, z, 1.0)  # the formula only where it is defined, so gradients stay finite
    return _ops.where(inside, _sp.xlogy(a - 1.0, safe) - safe - _sp.gammaln(a) - _ops.log(scale), float("-inf"))


def pdf(x, a, loc=0.0, scale=1.0):
    """density."""
    return _ops.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """distribution function P(a, z) (differentiable in x, loc and scale; not in a, as in autograd)."""
    x, a, loc, scale = as_floats(x, a, loc, scale)
    return _sp.gammainc(a, _ops.clamp_min((x - loc) / scale, 0.0))


numpy_api(globals(), __name__)
