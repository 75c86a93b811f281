"""The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019), reparameterisable."""

from __future__ import annotations

import math

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.distribution import (
    broadcast_all,
    check_param,
    clamp_probs,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
    resolve_validate_args,
)
from ember.distributions.exp_family import ExponentialFamily
from ember.nn import functional as F
from ember.tensor import Tensor


class ContinuousBernoulli(ExponentialFamily):
    """ContinuousBernoulli(probs=... | logits=..., lims=(0.499, 0.501)): density C(p) p^x (1-p)^(1-x) on [0, 1]."""

    # Near p = 1/2 the closed forms divide 0 by 0, so for probs inside `lims` Taylor expansions are used instead.

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (probs,) = broadcast_all(probs)
            if resolve_validate_args(validate_args):
                # checked here, before clamping would hide values outside [0, 1]
                check_param(self, "probs", probs, constraints.unit_interval)
            self.probs = clamp_probs(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        self._lims = lims
        super().__init__(shape, (), validate_args)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @property
    def param_shape(self) -> tuple:
        return self._batch_shape

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return ops.where(self._outside_unstable_region(), self.probs, self._lims[0] * ops.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p), the normaliser."""
        cut_probs = self._cut_probs()
        below_half = ops.where(cut_probs <= 0.5, cut_probs, ops.zeros_like(cut_probs))
        above_half = ops.where(cut_probs >= 0.5, cut_probs, ops.ones_like(cut_probs))
        log_norm = ((-cut_probs).log1p() - cut_probs.log()).abs().log() - ops.where(
            cut_probs <= 0.5, (-2.0 * below_half).log1p(), (2.0 * above_half - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / ((-cut_probs).log1p() - cut_probs.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ops.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    @property
    def variance(self) -> Tensor:
        cut_probs = self._cut_probs()
        vars_ = (cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs).pow(2)
                 + 1.0 / ((-cut_probs).log1p() - cut_probs.log()).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._outside_unstable_region(), vars_, taylor)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = creation.rand(*shape, dtype=self.probs.dtype, device=self.probs.device)
        with grad_mode.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.icdf(creation.rand(*shape, dtype=self.probs.dtype, device=self.probs.device))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (cut_probs.pow(value) * (1.0 - cut_probs).pow(1.0 - value) + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded = ops.where(self._outside_unstable_region(), cdfs, value)
        return ops.where(value <= 0.0, ops.zeros_like(value),
                         ops.where(value >= 1.0, ops.ones_like(value), unbounded))

    def icdf(self, value) -> Tensor:
        cut_probs = self._cut_probs()
        inverted = (((-cut_probs + value * (2.0 * cut_probs - 1.0)).log1p() - (-cut_probs).log1p())
                    / (cut_probs.log() - (-cut_probs).log1p()))
        return ops.where(self._outside_unstable_region(), inverted, value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x):
        """log of the normaliser as a function of the natural parameter (a Taylor series near 0)."""
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = ops.where(outside, x, (self._lims[0] - 0.5) * ops.ones_like(x))
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ops.where(outside, log_norm, taylor)


__all__ = ["ContinuousBernoulli"]
