"""The Bernoulli distribution over {0, 1}, parameterised by probs or logits."""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import (
    BinaryProbsLogits,
    broadcast_all,
)
from ember.distributions.exp_family import ExponentialFamily
from ember.nn import functional as F
from ember.tensor import Tensor


class Bernoulli(BinaryProbsLogits, ExponentialFamily):
    """Bernoulli(probs=...) or Bernoulli(logits=...): 1 with probability probs = sigmoid(logits)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    @property
    def param_shape(self) -> tuple:
        return self._batch_shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            return creation.bernoulli(self.probs.detach().expand(*shape))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = ops.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """The values 0 and 1, shaped (2, *batch_shape) (or (2, 1, ...) without expand)."""
        param = self.__dict__.get("probs", self.__dict__.get("logits"))
        values = creation.arange(2, dtype=param.dtype, device=param.device).reshape(2, *([1] * len(self._batch_shape)))
        return values.expand(2, *self._batch_shape) if expand else values

    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple:
        return (self.probs.logit(),)

    def _log_normalizer(self, x):
        return x.exp().log1p()


__all__ = ["Bernoulli"]
