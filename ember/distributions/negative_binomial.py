"""The negative binomial distribution: failures before total_count successes (a gamma-Poisson mixture)."""

from __future__ import annotations

from ember.autograd import grad_mode
from ember.distributions import _sampling, constraints
from ember.distributions.distribution import (
    BinaryProbsLogits,
    Distribution,
    broadcast_all,
)
from ember.distributions.gamma import Gamma
from ember.nn import functional as F
from ember.tensor import Tensor


class NegativeBinomial(BinaryProbsLogits, Distribution):
    """NegativeBinomial(total_count, probs=...) or (total_count, logits=...); probs is each trial's success rate."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs,
                                                         what="NegativeBinomial(total_count, probs)")
            self.total_count = self.total_count.to(self.probs.dtype)
            shape = self.probs.shape
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits,
                                                          what="NegativeBinomial(total_count, logits)")
            self.total_count = self.total_count.to(self.logits.dtype)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    @property
    def param_shape(self) -> tuple:
        return self._batch_shape

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape=()) -> Tensor:
        with grad_mode.no_grad():
            gamma = Gamma(self.total_count.detach(), (-self.logits.detach()).exp(), validate_args=False)
            return _sampling.poisson(gamma.sample(sample_shape))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = (-(self.total_count + value).lgamma() + (1.0 + value).lgamma()
                             + self.total_count.lgamma())
        # total_count = value = 0 has probability 1, where the lgamma terms are infinite
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized - log_normalization


__all__ = ["NegativeBinomial"]
