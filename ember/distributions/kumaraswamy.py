"""The Kumaraswamy distribution on (0, 1), a Beta look-alike with a closed-form cdf, as a transformed uniform."""

from __future__ import annotations

import math

from ember import ops
from ember.distributions import constraints
from ember.distributions.distribution import broadcast_all, euler_constant
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, PowerTransform
from ember.distributions.uniform import Uniform
from ember.tensor import Tensor


def _moments(a, b, n):
    """E[X^n] = b * B(1 + n / a, b)."""
    arg1 = 1 + n / a
    return b * (arg1.lgamma() + b.lgamma() - (arg1 + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(concentration1, concentration0): density a b x^(a-1) (1 - x^a)^(b-1)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(
            concentration1, concentration0, what="Kumaraswamy(concentration1, concentration0)")
        base = Uniform(ops.full_like(self.concentration0, 0), ops.full_like(self.concentration0, 1),
                       validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(*batch_shape)
        new.concentration0 = self.concentration0.expand(*batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        """((a - 1) / (a b - 1)) ** (1 / a), a = concentration1, b = concentration0, where both are >= 1; else NaN."""
        # PyTorch 2.13 exchanges a and b in this formula (so its mode is NaN whenever concentration0 > 1): this is the
        # density's maximum
        a, b = self.concentration1, self.concentration0
        undefined = (a < 1) | (b < 1)
        a_safe, b_safe = a.masked_fill(undefined, 2.0), b.masked_fill(undefined, 2.0)  # finite gradients where masked
        mode = ((a_safe - 1) / (a_safe * b_safe - 1)).pow(a_safe.reciprocal())
        return mode.masked_fill(undefined, math.nan)

    @property
    def variance(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = (self.concentration0 + 1).digamma() + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()


__all__ = ["Kumaraswamy"]
