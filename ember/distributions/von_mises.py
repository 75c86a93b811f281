"""The von Mises distribution on the circle, sampled by Best and Fisher's rejection method."""

from __future__ import annotations

import math

from ember import creation, dtypes, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, broadcast_all, lazy_property
from ember.tensor import Tensor


def _eval_poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


# Abramowitz and Stegun 9.8.1-9.8.4: polynomial approximations of I0 and I1 below and above x = 3.75
_COEF_SMALL = [[1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813],
               [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411]]
_COEF_LARGE = [[0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
                0.00392377],
               [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654,
                -0.00420059]]


def _log_modified_bessel_fn(x, order: int = 0):
    """log I_order(x) for x > 0 and order 0 or 1 (PyTorch's approximation, so densities agree with it)."""
    y = (x / 3.75) ** 2
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    xl = x.clamp(min=3.75)  # the large-x form is only selected there; elsewhere its log would be of a negative
    large = xl - 0.5 * xl.log() + _eval_poly(3.75 / xl, _COEF_LARGE[order]).log()
    return ops.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, x):
    done = creation.zeros(*x.shape, dtype=dtypes.bool_, device=loc.device)
    while not bool(done.all().item()):
        u = creation.rand(3, *x.shape, dtype=loc.dtype, device=loc.device)
        u1, u2, u3 = u.unbind(0)
        z = (math.pi * u1).cos()
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | (((c / u2).log() + 1 - c) >= 0)
        # as PyTorch: a later acceptance replaces an earlier one (still a draw from the target), so that after
        # ember.manual_seed the samples are PyTorch's
        x = ops.where(accept, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """VonMises(loc, concentration): density exp(k cos(x - loc)) / (2 pi I0(k)) on the circle."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration, what="VonMises(loc, concentration)")
        super().__init__(self.loc.shape, (), validate_args)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * (value - self.loc).cos()
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _loc(self) -> Tensor:
        return self.loc.to(dtypes.float64)

    @lazy_property
    def _concentration(self) -> Tensor:
        return self.concentration.to(dtypes.float64)

    @lazy_property
    def _proposal_r(self) -> Tensor:
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho**2) / (2 * rho)
        # for tiny kappa the closed form cancels catastrophically: its Taylor expansion instead
        return ops.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            # sampled in float64: the acceptance test loses too much in float32 for large concentrations
            x = creation.zeros(*shape, dtype=dtypes.float64, device=self.loc.device)
            loc, conc, r = (t.detach() for t in (self._loc, self._concentration, self._proposal_r))
            return _rejection_sample(loc, conc, r, x).to(self.loc.dtype)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()


__all__ = ["VonMises"]
