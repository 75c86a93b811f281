"""The beta distribution on [0, 1], as the first coordinate of a two-component Dirichlet."""

from __future__ import annotations

from ember import ops
from ember.distributions import constraints
from ember.distributions.dirichlet import Dirichlet
from ember.distributions.distribution import Distribution, broadcast_all
from ember.distributions.exp_family import ExponentialFamily
from ember.tensor import Tensor


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0): density x^(a-1) (1-x)^(b-1) / B(a, b), a = concentration1."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None) -> None:
        concentration1, concentration0 = broadcast_all(concentration1, concentration0,
                                                       what="Beta(concentration1, concentration0)")
        # Beta checks its own parameters, so that an error names concentration1/0 rather than the inner Dirichlet
        self._dirichlet = Dirichlet(ops.stack([concentration1, concentration0], -1), validate_args=False)
        super().__init__(self._dirichlet._batch_shape, (), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, (), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(ops.stack([value, 1.0 - value], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def _natural_params(self) -> tuple:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return x.lgamma() + y.lgamma() - (x + y).lgamma()


__all__ = ["Beta"]
