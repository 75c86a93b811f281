"""`ember.special`: PyTorch's `torch.special` namespace (special functions).

The kernels of gammaln, digamma, polygamma, erfc, erfinv, ndtr, log_ndtr, ndtri, entr, gammainc,
gammaincc, xlogy and xlog1py are SciPy's (`ember/ops/special.py`), as are the Bessel and Airy functions', erfcx's and
zeta's (`ember/ops/special_bessel.py`); the orthogonal polynomials are NumPy recurrences
(`ember/ops/orthogonal_polynomials.py`). Not all are differentiable: as in PyTorch, the Bessel functions under their
long names, airy_ai, spherical_bessel_j0 and the polynomials give results without a gradient.
"""

from __future__ import annotations

from ember.ops.activation import log_softmax, softmax
from ember.ops.elementwise import erf, exp2, expm1, log1p, round, sigmoid
from ember.ops.elementwise_composed import sinc
from ember.ops.orthogonal_polynomials import (
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    hermite_polynomial_h,
    hermite_polynomial_he,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
)
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
from ember.ops.special_bessel import (
    airy_ai,
    bessel_j0,
    bessel_j1,
    bessel_y0,
    bessel_y1,
    erfcx,
    i0,
    i0e,
    i1,
    i1e,
    modified_bessel_i0,
    modified_bessel_i1,
    modified_bessel_k0,
    modified_bessel_k1,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
    spherical_bessel_j0,
    zeta,
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


__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
           "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc",
           "gammaln", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
           "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln",
           "ndtr", "ndtri", "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "sinc", "softmax",
           "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]

