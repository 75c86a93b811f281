"""`ember.scipy.stats.chi2`: the chi-squared distribution with df degrees of freedom (gamma(df/2) scaled by 2)."""

from __future__ import annotations

from ember.scipy._args import as_floats, numpy_api
from ember.scipy.stats import gamma as _gamma


def logpdf(x, df, loc=0.0, scale=1.0):
    """log density."""
    x, df, loc, scale = as_floats(x, df, loc, scale)
    return _gamma.logpdf(x, df / 2.0, loc, scale * 2.0)


def pdf(x, df, loc=0.0, scale=1.0):
    """density."""
    x, df, loc, scale = as_floats(x, df, loc, scale)
    return _gamma.pdf(x, df / 2.0, loc, scale * 2.0)


def cdf(x, df, loc=0.0, scale=1.0):
    """distribution function (differentiable in x, loc and scale)."""
    x, df, loc, scale = as_floats(x, df, loc, scale)
    return _gamma.cdf(x, df / 2.0, loc, scale * 2.0)


numpy_api(globals(), __name__)
