"""The categorical distribution over {0, ..., K-1}, parameterised by probs or logits over the last dimension."""

from __future__ import annotations

import math

from ember import creation, dtypes, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import (
    Distribution,
    as_float_tensor,
    finfo,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)
from ember.tensor import Tensor


class Categorical(Distribution):
    """Categorical(probs=...) or Categorical(logits=...): K classes in the last dimension, batch in the others.

    probs are normalised to sum to 1, logits to log-probabilities (logits - logsumexp(logits)).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            probs = as_float_tensor(probs)
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            param = self.probs
        else:
            logits = as_float_tensor(logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            param = self.logits
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1], (), validate_args)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @property
    def _param(self) -> Tensor:
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> tuple:
        return self._batch_shape + (self._num_events,)

    @property
    def mean(self) -> Tensor:
        return creation.full(self._batch_shape, math.nan, dtype=self._param.dtype, device=self._param.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return creation.full(self._batch_shape, math.nan, dtype=self._param.dtype, device=self._param.device)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        n = 1
        for d in shape[: len(shape) - len(self._batch_shape)]:
            n *= d
        with grad_mode.no_grad():
            probs_2d = self.probs.detach().reshape(-1, self._num_events)
            draws = creation.multinomial(probs_2d, n, True).t()  # (n, batch)
        return draws.reshape(*shape)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.to(dtypes.int64).unsqueeze(-1)
        value, log_pmf = ops.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=float(finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """The values 0..K-1, shaped (K, *batch_shape) (or (K, 1, ...) without expand)."""
        values = creation.arange(self._num_events, device=self._param.device)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        return values.expand(self._num_events, *self._batch_shape) if expand else values


__all__ = ["Categorical"]
