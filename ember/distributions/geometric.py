"""The geometric distribution: the number of failures before the first success."""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import (
    BinaryProbsLogits,
    Distribution,
    _flat,
    broadcast_all,
    finfo,
)
from ember.nn import functional as F
from ember.tensor import Tensor


class Geometric(BinaryProbsLogits, Distribution):
    """Geometric(probs=...) or Geometric(logits=...): P(k) = (1 - p)^k p for k = 0, 1, ...."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

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
        if self._validate_args and probs is not None:
            valid = self.probs > 0  # p = 0 never succeeds: no distribution (PyTorch's extra check)
            if not bool(valid.all().item()):
                raise ValueError(_flat(
                    f"Expected parameter probs (Tensor of shape {tuple(self.probs.shape)}) of distribution {self!r} "
                    f"to be positive but found invalid values: {self.probs.detach()!r}"))

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return ops.zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = self.probs.detach()
        with grad_mode.no_grad():
            tiny = float(finfo(probs.dtype).tiny)  # u > 0, so log(u) is finite
            u = creation.empty(*shape, dtype=probs.dtype, device=probs.device).uniform_(tiny, 1)
            return (u.log() / (-probs).log1p()).floor()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 and k = 0 is log(1) = 0, not 0 * log(0)
        probs = probs.masked_fill((probs == 1) & (value == 0), 0.0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


__all__ = ["Geometric"]
