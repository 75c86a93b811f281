"""The logistic-normal distribution on the simplex: a normal vector pushed through stick breaking."""

from __future__ import annotations

from ember.distributions import constraints
from ember.distributions.normal import Normal
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import StickBreakingTransform
from ember.tensor import Tensor


class LogisticNormal(TransformedDistribution):
    """LogisticNormal(loc, scale): StickBreakingTransform()(X) for X ~ Normal(loc, scale) over the last dimension, so
    a K-vector of parameters gives points of the (K+1)-simplex."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        # the parameters are checked as LogisticNormal's (through the properties below), so errors name it
        base = Normal(loc, scale, validate_args=False)
        if not base.batch_shape:
            base = base.expand([1])  # scalar parameters: one logit, points of the 2-simplex
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(LogisticNormal, _instance))

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale


__all__ = ["LogisticNormal"]
