"""The Bernoulli distribution over {0, 1}, parameterised by probs or logits."""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, as_float_tensor, clamp_probs
from ember.nn import functional as F
from ember.tensor import Tensor


class Bernoulli(Distribution):
    """Bernoulli(probs=...) or Bernoulli(logits=...): 1 with probability probs = sigmoid(logits)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.probs = as_float_tensor(probs)
            shape = self.probs.shape
        else:
            self.logits = as_float_tensor(logits)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    def __getattr__(self, name: str):
        # The parameter not given is derived on first use (PyTorch's lazy_property).
        if name == "probs":
            self.__dict__["probs"] = value = ops.sigmoid(self.__dict__["logits"])
            return value
        if name == "logits":
            p = clamp_probs(self.__dict__["probs"])
            self.__dict__["logits"] = value = p.log() - (-p).log1p()
            return value
        raise AttributeError(f"'Bernoulli' object has no attribute {name!r}")

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


__all__ = ["Bernoulli"]
