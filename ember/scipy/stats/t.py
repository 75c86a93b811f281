"""`ember.scipy.stats.t`: Student's t distribution with df degrees of freedom, shifted by loc and scaled."""

from __future__ import annotations

import math

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_floats, numpy_api


def logpdf(x, df, loc=0.0, scale=1.0):
    """log density: lgamma((df+1)/2) - lgamma(df/2) - log(sqrt(df pi) scale) - (df+1)/2 log(1 + z^2/df)."""
    x, df, loc, scale = as_floats(x, df, loc, scale)
    z = (x - loc) / scale
    return (_sp.gammaln((df + 1) / 2) - _sp.gammaln(df / 2) - 0.5 * _ops.log(df * math.pi) - _ops.log(scale)
            - (df + 1) / 2 * _ops.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    """density."""
    return _ops.exp(logpdf(x, df, loc, scale))


numpy_api(globals(), __name__)
