"""Samplers PyTorch has as ATen kernels (gamma, Dirichlet, Poisson, binomial), drawn from Ember's generator, and
the implicit reparameterisation gradients of the gamma and Dirichlet draws (ATen's standard_gamma_grad_one and
dirichlet_grad_one, vectorised).

The draws use NumPy's samplers on the default generator's engine (`Generator.numpy`), so they follow
`ember.manual_seed` but are not PyTorch's numbers.
"""

from __future__ import annotations

import numpy as np

from ember import creation
from ember.autograd.function import Function
from ember.ops.special import _scipy_special
from ember.random import host_rng
from ember.tensor import Tensor


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _like(arr: np.ndarray, t: Tensor) -> Tensor:
    return creation.tensor(np.ascontiguousarray(arr), dtype=t.dtype, device=t.device)


def _digamma(x: np.ndarray) -> np.ndarray:
    # SciPy's, as ember.digamma's kernel is: without SciPy, the same one-line ImportError naming the extra
    return _scipy_special(np, "digamma").digamma(x)


# --- gamma ----------------------------------------------------------------------------------------------------------
def _draw_standard_gamma(alpha: np.ndarray, dtype) -> np.ndarray:
    x = host_rng().numpy.standard_gamma(alpha)
    tiny = np.finfo(dtype).tiny
    # draws for small alpha underflow to 0, where log_prob and the gradient break: PyTorch clamps to tiny too
    return np.maximum(np.asarray(x, dtype=dtype), tiny)


_GAMMA_COEF = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07],
])


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d x / d alpha at a fixed quantile, for x ~ Gamma(alpha, 1) (ATen's standard_gamma_grad_one, vectorised)."""
    # ATen's three regimes (a series for small x, Rice's saddle point for large alpha, a rational fit elsewhere),
    # each evaluated everywhere and then selected
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        # x < 0.8: differentiate the series of the regularised incomplete gamma function
        numer, denom = np.ones_like(x), alpha.copy()
        series1, series2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = x**alpha
        gamma_pdf = x ** (alpha - 1) * np.exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (np.log(x) - _digamma(alpha)) * gamma_cdf - pow_x_alpha * series2
        small = -gamma_cdf_alpha / gamma_pdf
        small = np.where(np.isnan(small), 0.0, small)
        # alpha > 8: the saddle-point expansion, with its own form near the mode
        numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
        numer_2 = 1440 * alpha**2 + 6 * x * (53 - 120 * x) - 65 * x * x / alpha + alpha * (107 + 3600 * x)
        near = numer_1 * numer_2 / (1244160 * alpha**4)
        den = np.sqrt(8 * alpha)
        term2 = den / (alpha - x)
        term3 = (x - alpha - alpha * np.log(x / alpha)) ** -1.5
        term23 = np.where(x < alpha, term2 - term3, term2 + term3)
        term1 = np.log(x / alpha) * term23 - np.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        far = -stirling * x * term1 / den
        large = np.where((0.9 * alpha <= x) & (x <= 1.1 * alpha), near, far)
        # otherwise: a bivariate rational approximation in log(x / alpha) and log(alpha)
        u, v = np.log(x / alpha), np.log(alpha)
        uf, coef = u.reshape(-1), _GAMMA_COEF[:, :, None]
        c = coef[0] + uf * (coef[1] + uf * coef[2])
        vf = v.reshape(-1)
        p = c[0] + vf * (c[1] + vf * (c[2] + vf * c[3]))
        q = c[4] + vf * (c[5] + vf * (c[6] + vf * c[7]))
        rational = np.exp(p / q).reshape(x.shape)
    return np.where(x < 0.8, small, np.where(alpha > 8.0, large, rational))


class _StandardGamma(Function):
    """Gamma(alpha, 1) draws whose gradient in alpha is the implicit reparameterisation gradient."""

    @staticmethod
    def forward(ctx, alpha):
        x = _like(_draw_standard_gamma(_host(alpha), alpha.dtype.np), alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _like(standard_gamma_grad(_host(alpha), _host(x)), alpha)


def standard_gamma(alpha: Tensor) -> Tensor:
    """One Gamma(alpha, 1) draw per element of alpha, differentiable in alpha (PyTorch's _standard_gamma)."""
    return _StandardGamma.apply(alpha)


# --- Dirichlet ------------------------------------------------------------------------------------------------------
def _beta_grad_alpha_small(x, alpha, beta):
    factor = _digamma(alpha) - _digamma(alpha + beta) - np.log(x)
    numer = np.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * (1 - x) ** -beta * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_beta_small(x, alpha, beta):
    factor = _digamma(alpha + beta) - _digamma(beta)
    numer, betas, dbetas = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -((1 - x) ** (1 - beta)) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = np.sqrt(alpha * beta / (total + 1)) / total
    poly = 47 * x * beta**4 + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * beta**3 + alpha * (
            3 * (59 + 180 * beta - 90 * x) * beta**2 + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha**3 * beta**2 * (1 + 12 * total)
    at_mean = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / np.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha)) * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * alpha**2 * (x - 1) + alpha * beta * (x - 1) - x * beta**2
    axbx = alpha * (x - 1) + beta * x
    term1 = term1_num / (np.sqrt(2 * alpha / beta) * total**1.5 * axbx * axbx)
    term2 = 0.5 * np.log(alpha / (total * x))
    term3 = np.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4 = (beta * np.log(beta / (total * (1 - x))) + alpha * np.log(alpha / (total * x))) ** -1.5
    term1234 = term1 + term2 * (term3 + np.where(x < mean, term4, -term4))
    away = stirling * prefactor * term1234
    return np.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), at_mean, away)


_DIRICHLET_COEF = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def dirichlet_grad(x: np.ndarray, alpha: np.ndarray, total: np.ndarray) -> np.ndarray:
    """ATen's dirichlet_grad_one, vectorised: -(d/dalpha cdf(x; alpha, total - alpha)) / pdf / (1 - x) of a Beta."""
    # four regimes: series near 0 and near 1, a saddle point when both parameters are large, a rational fit otherwise
    x, alpha, total = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (x, alpha, total)))
    beta = total - alpha
    boundary = total * x * (1 - x)
    with np.errstate(all="ignore"):
        near0 = _beta_grad_alpha_small(x, alpha, beta)
        near1 = -_beta_grad_beta_small(1 - x, beta, alpha)
        mid = _beta_grad_alpha_mid(x, alpha, beta)
        u = np.log(x)
        a = np.log(alpha) - u
        b = np.log(total) - a
        pow_u, pow_a = (np.ones_like(x), u, u * u), (np.ones_like(x), a, a * a)
        p, q = np.zeros_like(x), np.zeros_like(x)
        for i in range(3):
            for j in range(3):
                ua = pow_u[i] * pow_a[j]
                cp, cq = _DIRICHLET_COEF[0, i, j], _DIRICHLET_COEF[1, i, j]
                p = p + ua * (cp[0] + b * (cp[1] + b * (cp[2] + b * cp[3])))
                q = q + ua * (cq[0] + b * (cq[1] + b * (cq[2] + b * cq[3])))
        approx = x * (_digamma(total) - _digamma(alpha)) / beta
        rational = p / q * approx
    out = np.where((alpha > 6) & (beta > 6), mid, rational)
    out = np.where((x >= 0.5) & (boundary < 0.75), near1, out)
    return np.where((x <= 0.5) & (boundary < 2.5), near0, out)


class _Dirichlet(Function):
    """Dirichlet draws (normalised gammas) with PyTorch's reparameterisation gradient in the concentration."""

    @staticmethod
    def forward(ctx, concentration):
        alpha = _host(concentration)
        g = _draw_standard_gamma(alpha, np.float64)
        x = g / g.sum(-1, keepdims=True)
        x = np.maximum(x, np.finfo(concentration.dtype.np).tiny)  # as PyTorch: no exact zeros, where log_prob is -inf
        out = _like(x, concentration)
        ctx.save_for_backward(concentration, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        concentration, x = ctx.saved_tensors
        alpha = _host(concentration)
        total = np.broadcast_to(alpha.sum(-1, keepdims=True), alpha.shape)
        g = _like(dirichlet_grad(_host(x), alpha, total), concentration)
        return g * (grad - (x * grad).sum(-1, keepdim=True))


def dirichlet(concentration: Tensor) -> Tensor:
    """One Dirichlet draw per row of concentration (last dimension), differentiable in it."""
    return _Dirichlet.apply(concentration)


# --- counts ---------------------------------------------------------------------------------------------------------
def poisson(rate: Tensor) -> Tensor:
    """Poisson counts with the given rates, as floats of rate's dtype (torch.poisson)."""
    counts = host_rng().numpy.poisson(_host(rate))
    return _like(np.asarray(counts, np.float64), rate)


def binomial(total_count: Tensor, probs: Tensor) -> Tensor:
    """Binomial counts (torch.binomial), as floats of probs' dtype."""
    n = np.rint(_host(total_count)).astype(np.int64)
    p = np.clip(_host(probs), 0.0, 1.0)
    return _like(np.asarray(host_rng().numpy.binomial(n, p), np.float64), probs)


__all__ = ["binomial", "dirichlet", "dirichlet_grad", "poisson", "standard_gamma", "standard_gamma_grad"]
