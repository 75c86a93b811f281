"""`ember.special`: PyTorch's `torch.special` namespace (special functions, all differentiable).

The kernels of gammaln, digamma, polygamma, erfc, erfinv, ndtr, log_ndtr, ndtri, entr, gammainc,
gammaincc, xlogy and xlog1py are SciPy's (`ember/ops/special.py`).
"""

from __future__ import annotations

from ember.ops.activation import log_softmax, softmax
from ember.ops.elementwise import erf, exp2, expm1, log1p, sigmoid
from ember.ops.reduction import logsumexp
from ember.ops.special import (
    digamma,
    entr,
    erfc,
    erfinv,
    gammainc,
    gammaincc,
    lgamma,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    xlog1py,
    xlogy,
)

gammaln = lgamma
psi = digamma
expit = sigmoid


def multigammaln(input, p: int):
    """log of the multivariate gamma function of dimension p: p(p-1)/4 log(pi) + sum_j lgamma(x - j/2)."""
    import math

    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"multigammaln: p must be a positive integer, got {p!r}")
    out = lgamma(input)
    for j in range(1, p):
        out = out + lgamma(input - j / 2.0)
    return out + p * (p - 1) / 4.0 * math.log(math.pi)


__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma",
           "psi", "softmax", "xlog1py", "xlogy"]
