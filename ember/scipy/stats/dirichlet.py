"""`ember.scipy.stats.dirichlet`: the Dirichlet distribution with concentration alpha (over the last axis)."""

from __future__ import annotations

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api


def logpdf(x, alpha):
    """log density: sum((alpha-1) log x) + lgamma(sum alpha) - sum lgamma(alpha)."""
    x, alpha = as_floats(x, alpha)
    return (_ops.sum(_sp.xlogy(alpha - 1.0, x), -1) + _sp.gammaln(_ops.sum(alpha, -1))
            - _ops.sum(_sp.gammaln(alpha), -1))


def pdf(x, alpha):
    """density."""
    return _ops.exp(logpdf(x, alpha))


numpy_api(globals(), __name__)
