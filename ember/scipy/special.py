"""`ember.scipy.special`: scipy.special's functions as HIPS autograd differentiates them (`autograd.scipy.special`).

Every function takes NumPy data, numbers or tensors, computes in float64 for integer input and returns
an ember.numpy array. The kernels are SciPy's (`ember/ops/special.py`).
"""

from __future__ import annotations

from ember import ops as _ops
from ember import special as _sp
from ember.scipy._args import as_float, as_floats, numpy_api


def gammaln(x):
    """log|Gamma(x)|."""
    return _sp.gammaln(as_float(x))


def gamma(x):
    """Gamma(x)."""
    from ember.ops.special import gamma as _gamma

    return _gamma(as_float(x))


def rgamma(x):
    """1 / Gamma(x)."""
    return 1.0 / gamma(x)


def digamma(x):
    """d/dx log Gamma(x)."""
    return _sp.digamma(as_float(x))


psi = digamma


def polygamma(n, x):
    """The n-th derivative of digamma."""
    return _sp.polygamma(int(n), as_float(x))


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d."""
    return _sp.multigammaln(as_float(a), int(d))


def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    a, b = as_floats(a, b)
    return _sp.gammaln(a) + _sp.gammaln(b) - _sp.gammaln(a + b)


def beta(a, b):
    """The beta function B(a, b) (for positive a and b)."""
    return _ops.exp(betaln(a, b))


def erf(x):
    """The error function."""
    return _ops.erf(as_float(x))


def erfc(x):
    """1 - erf(x)."""
    return _sp.erfc(as_float(x))


def erfinv(y):
    """The inverse of erf."""
    return _sp.erfinv(as_float(y))


def erfcinv(y):
    """The inverse of erfc."""
    return _sp.erfinv(1.0 - as_float(y))


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return _ops.sigmoid(as_float(x))


def logit(p):
    """log(p / (1 - p))."""
    return _sp.logit(as_float(p))


def xlogy(x, y):
    """x * log(y), 0 where x is 0."""
    return _sp.xlogy(*as_floats(x, y))


def xlog1py(x, y):
    """x * log1p(y), 0 where x is 0."""
    return _sp.xlog1py(*as_floats(x, y))


def entr(x):
    """-x log x (0 at 0, -inf for negative x)."""
    return _sp.entr(as_float(x))


def gammainc(a, x):
    """The regularised lower incomplete gamma function (differentiable in x)."""
    return _sp.gammainc(*as_floats(a, x))


def gammaincc(a, x):
    """The regularised upper incomplete gamma function (differentiable in x)."""
    return _sp.gammaincc(*as_floats(a, x))


def ndtr(x):
    """The standard normal distribution function."""
    return _sp.ndtr(as_float(x))


def log_ndtr(x):
    """log of the standard normal distribution function."""
    return _sp.log_ndtr(as_float(x))


def ndtri(p):
    """The standard normal quantile function."""
    return _sp.ndtri(as_float(p))


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """log(sum(b * exp(a))) over axis, without overflow; with return_sign, (log|s|, sign(s))."""
    from ember.numpy import _axis

    t = as_float(a)
    axis = _axis(axis)
    if b is None and not return_sign:
        out = _ops.logsumexp(t, tuple(range(t.ndim)) if axis is None else axis, keepdims)
        return out
    m = _ops.amax(t, axis, True).detach()  # a constant shift: the gradient is exact either way
    m = _ops.where(_ops.isfinite(m), m, 0.0)
    terms = _ops.exp(t - m)
    if b is not None:
        terms = terms * as_floats(b, t)[0]
    s = _ops.sum(terms, axis, True)
    out = _ops.log(_ops.abs(s)) + m
    if not keepdims:
        out = _ops.reshape(out, tuple(d for i, d in enumerate(t.shape)
                                      if axis is not None and i not in _dims(axis, t.ndim)))
    if return_sign:
        sign = _ops.sign(s)
        return out, sign if keepdims else _ops.reshape(sign, tuple(out.shape))
    return out


def _dims(axis, ndim) -> tuple:
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over axis (all of x when None)."""
    t = as_float(x)
    return _ops.exp(t - logsumexp(t, axis, keepdims=True))


def log_softmax(x, axis=None):
    """x - logsumexp(x) over axis (all of x when None)."""
    t = as_float(x)
    return t - logsumexp(t, axis, keepdims=True)


numpy_api(globals(), __name__)
