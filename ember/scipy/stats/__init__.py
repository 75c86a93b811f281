"""`ember.scipy.stats`: the distributions HIPS autograd differentiates (`autograd.scipy.stats`), one module each.

`import ember.scipy.stats.norm as norm; norm.logpdf(x, loc, scale)` and `from ember.scipy.stats import t`
work as in autograd; every density is differentiable in its data and its parameters.
"""

from ember.scipy.stats import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t  # noqa: F401

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
