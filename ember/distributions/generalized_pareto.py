"""The generalized Pareto distribution (exponential, Pareto and uniform are special cases), reparameterisable."""

from __future__ import annotations

import math

from ember import creation, ops
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, broadcast_all
from ember.tensor import Tensor


class GeneralizedPareto(Distribution):
    """GeneralizedPareto(loc, scale, concentration): survival (1 + c z)^(-1/c) at z = (x - loc) / scale (exp(-z) for
    c = 0); support [loc, loc - scale / c] for c < 0, [loc, inf) otherwise."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(
            loc, scale, concentration, what="GeneralizedPareto(loc, scale, concentration)")
        super().__init__(self.loc.shape, (), validate_args)

    def _safe_concentration(self):
        # c ~ 0 takes the exponential's formulas; 1 stands in for it in the other branch so that branch stays finite
        eq_zero = ops.isclose(self.concentration, ops.zeros_like(self.concentration))
        return eq_zero, ops.where(eq_zero, ops.ones_like(self.concentration), self.concentration)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.icdf(creation.rand(*shape, dtype=self.loc.dtype, device=self.loc.device))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + ops.ones_like(z)
        # y = 0 is c = -1, the uniform distribution: its density is flat, without the log1p term (log1p(-z) at z = 1)
        where_nonzero = ops.where(y == 0, y, y * (safe_conc * z).log1p())
        return -self.scale.log() - ops.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value) -> Tensor:
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        return ops.where(eq_zero, -z, -(safe_conc * z).log1p() / safe_conc)

    def log_cdf(self, value) -> Tensor:
        """log P(X <= value)."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value) -> Tensor:
        eq_zero, safe_conc = self._safe_concentration()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe_conc * (-safe_conc * logu).expm1()
        return ops.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1  # infinite otherwise: NaN, as PyTorch
        safe_conc = ops.where(valid, self.concentration, 0.5)
        return ops.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        safe_conc = ops.where(valid, self.concentration, 0.25)
        return ops.where(valid, self.scale.pow(2) / ((1 - safe_conc).pow(2) * (1 - 2 * safe_conc)), math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return ops.broadcast_to(self.scale.log() + self.concentration + 1, self._batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        bounded = self.concentration < 0
        # -1 stands in for the concentrations without an upper bound, so no division by zero is attempted
        safe_conc = ops.where(bounded, self.concentration, -1.0)
        upper = ops.where(bounded, lower - self.scale / safe_conc, math.inf)
        return constraints.interval(lower, upper)


__all__ = ["GeneralizedPareto"]
