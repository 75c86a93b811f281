"""The inverse gamma distribution: 1 / X for X gamma."""

from __future__ import annotations

import math

from ember import creation, ops
from ember.distributions import constraints
from ember.distributions.gamma import Gamma
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import PowerTransform
from ember.tensor import Tensor


class InverseGamma(TransformedDistribution):
    """InverseGamma(concentration, rate): 1 / X for X ~ Gamma(concentration, rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        # the parameters are checked as InverseGamma's (through the properties below), so errors name InverseGamma
        base = Gamma(concentration, rate, validate_args=False)
        neg_one = creation.tensor(-1.0, dtype=base.rate.dtype, device=base.rate.device)
        super().__init__(base, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(InverseGamma, _instance))

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        return ops.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        return ops.where(c > 2, self.rate.square() / ((c - 1).square() * (c - 2)), math.inf)

    def entropy(self) -> Tensor:
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()


__all__ = ["InverseGamma"]
