"""Student's t distribution, reparameterisable through a normal over the square root of a chi-squared."""

from __future__ import annotations

import math

from ember import creation
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, broadcast_all
from ember.distributions.gamma import Chi2
from ember.tensor import Tensor


class StudentT(Distribution):
    """StudentT(df, loc=0, scale=1)."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale, what="StudentT(df, loc, scale)")
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(self.df.shape, (), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        new.df, new.loc, new.scale = (t.expand(*batch_shape) for t in (self.df, self.loc, self.scale))
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, (), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.loc.masked_fill(self.df <= 1, math.nan)  # undefined for df <= 1

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        df = self.df
        safe = df.masked_fill(df <= 2, 3.0)  # keeps the masked entries' gradients finite (0, not nan)
        finite = self.scale.pow(2) * safe / (safe - 2)
        m = finite.masked_fill(df <= 2, math.inf)  # infinite for 1 < df <= 2, undefined below
        return m.masked_fill(df <= 1, math.nan)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = creation.randn(*shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + (0.5 * self.df).lgamma()
             - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y**2.0 / self.df).log1p() - z

    def entropy(self) -> Tensor:
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + lbeta)


__all__ = ["StudentT"]
