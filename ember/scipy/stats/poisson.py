"""`ember.scipy.stats.poisson`: the Poisson distribution with mean mu, shifted by loc."""

from __future__ import annotations

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api


def logpmf(k, mu, loc=0.0):
    """log probability of k: k log mu - mu - lgamma(k + 1) for whole k >= 0; -inf otherwise."""
    k, mu, loc = as_floats(k, mu, loc)
    k = k - loc
    valid = _ops.logical_and(_ops.ge(k, 0), _ops.eq(_ops.floor(k), k))
    safe = _ops.where(valid, k, 0.0)
    return _ops.where(valid, _sp.xlogy(safe, mu) - mu - _sp.gammaln(safe + 1.0), float("-inf"))


def pmf(k, mu, loc=0.0):
    """probability of k."""
    return _ops.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0.0):
    """P(K <= k) = Q(floor(k) + 1, mu) (differentiable in mu)."""
    k, mu, loc = as_floats(k, mu, loc)
    whole = _ops.floor(k - loc)
    return _ops.where(_ops.lt(whole, 0), 0.0, _sp.gammaincc(_ops.clamp_min(whole, 0.0) + 1.0, mu))


numpy_api(globals(), __name__)
