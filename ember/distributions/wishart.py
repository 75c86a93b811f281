"""The Wishart distribution over positive-definite matrices, sampled by the Bartlett decomposition."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ember import creation, linalg, ops
from ember.distributions import constraints
from ember.distributions.distribution import (
    Distribution,
    ParameterShapeError,
    _concrete,
    _flat,
    as_float_tensor,
    finfo,
    lazy_property,
    vec_to_tril_matrix,
)
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.gamma import Chi2
from ember.distributions.multivariate_normal import _precision_to_scale_tril
from ember.special import multigammaln
from ember.tensor import Tensor

_LOG_2 = math.log(2)


def _per_matrix(t: Tensor) -> Tensor:
    # a batch-shaped tensor (or a 0-dimensional one: df given as a number) against the batch of matrices
    return t.unsqueeze(-1).unsqueeze(-1)


def mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function of dimension p: sum_j digamma(x - j / 2), j < p (for x > (p - 1) / 2)."""
    if _concrete(x) and not bool((x > (p - 1) / 2).all().item()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    return (x.unsqueeze(-1) - creation.arange(p, dtype=x.dtype, device=x.device) / 2).digamma().sum(-1)


class Wishart(ExponentialFamily):
    """Wishart(df, covariance_matrix=... | precision_matrix=... | scale_tril=...): the law of sum_k x_k x_k^T for
    df normal vectors x_k of that covariance (df real, above dim - 1)."""

    support = constraints.positive_definite
    has_rsample = True

    @property
    def arg_constraints(self) -> dict:
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self._event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix}
        name, param = next((k, as_float_tensor(v)) for k, v in given.items() if v is not None)
        if param.ndim < 2:
            raise ValueError(f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = creation.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            df = as_float_tensor(df, param)
            try:
                batch_shape = tuple(np.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            except ValueError:  # a RuntimeError too, as PyTorch's
                raise ParameterShapeError(f"Wishart: the batch shapes of df {tuple(df.shape)} and {name} "
                                          f"{tuple(param.shape)} do not broadcast") from None
            self.df = ops.broadcast_to(df, batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        # checked whatever validate_args says, as PyTorch does: below dim - 1 the density does not exist
        if _concrete(self.df) and bool((self.df <= p - 1).any().item()):
            raise ValueError(_flat(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}."))
        self.__dict__[name] = param.expand(*batch_shape, *event_shape)
        if _concrete(self.df) and bool((self.df < p).any().item()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args)
        # the factor keeps the parameter's own (smaller) batch shape: solves then broadcast instead of repeating
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(param)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(param)
        self._dist_chi2 = self._bartlett_chi2()

    def _bartlett_chi2(self):
        # the Bartlett factor's squared diagonal: chi-squared with df, df - 1, ..., df - dim + 1 degrees of freedom
        p = self._event_shape[-1]
        dfs = self.df.unsqueeze(-1) - creation.arange(p, dtype=self.df.dtype, device=self.df.device)
        return Chi2(ops.broadcast_to(dfs, self._batch_shape + (p,)), validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self._event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.df = ops.broadcast_to(self.df, batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(*cov_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        new._dist_chi2 = new._bartlett_chi2()
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril  # noqa: N806
        return ops.matmul(L, L.mT).expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return ops.cholesky_inverse(self._unbroadcasted_scale_tril).expand(*self._batch_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return _per_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._event_shape[-1] - 1
        # for df <= dim + 1 the density has no peak among positive-definite matrices: NaN, as PyTorch
        factor = ops.where(factor <= 0, math.nan, factor)
        return _per_matrix(factor) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix  # noqa: N806
        diag_v = V.diagonal(dim1=-2, dim2=-1)
        return _per_matrix(self.df) * (V.pow(2) + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape) -> Tensor:
        # W = L A A^T L^T for A lower triangular: sqrt(chi2) on its diagonal, standard normals below it
        p = self._event_shape[-1]
        diagonal = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=float(finfo(self.df.dtype).eps))
        below = creation.randn(*sample_shape, *self._batch_shape, p * (p - 1) // 2, dtype=diagonal.dtype,
                               device=diagonal.device)
        chol = ops.matmul(self._unbroadcasted_scale_tril, diagonal.diag_embed() + vec_to_tril_matrix(below, diag=-1))
        return ops.matmul(chol, chol.mT)

    def rsample(self, sample_shape=(), max_try_correction=None) -> Tensor:
        """Reparameterised samples; a draw singular to working precision (likely when df is near dim - 1) is drawn
        again, up to max_try_correction times (default 10), with a warning."""
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample.detach())
        if bool(singular.any().item()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample = ops.where(singular.unsqueeze(-1).unsqueeze(-1), self._bartlett_sampling(sample_shape), sample)
                singular = ~self.support.check(sample.detach())
                if not bool(singular.any().item()):
                    break
        return sample

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        L = self._unbroadcasted_scale_tril  # noqa: N806
        half_log_det = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = ops.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + half_log_det) - multigammaln(nu / 2, p)
                + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet - trace / 2)

    def entropy(self) -> Tensor:
        nu, p = self.df, self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + half_log_det) + multigammaln(nu / 2, p)
                - (nu - p - 1) / 2 * mvdigamma(nu / 2, p) + nu * p / 2)

    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + multigammaln(
            y + (p + 1) / 2, p)


__all__ = ["Wishart", "mvdigamma"]
