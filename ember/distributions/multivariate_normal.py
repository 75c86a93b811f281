"""The multivariate normal distribution, given by a covariance, a precision or a lower Cholesky factor."""

from __future__ import annotations

import math

import numpy as np

from ember import creation, linalg, ops
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, ParameterShapeError, as_float_tensor, lazy_property
from ember.tensor import Tensor


def batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Matrix-vector products over broadcast batch dimensions."""
    return ops.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:  # noqa: N803
    """x^T (L L^T)^-1 x for lower-triangular L, by one triangular solve (batch dimensions broadcast)."""
    return linalg.solve_triangular(bL, bx.unsqueeze(-1), upper=False).squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(P: Tensor) -> Tensor:  # noqa: N803
    # The Cholesky factor of P with its rows and columns reversed gives P^-1's lower factor without forming P^-1
    Lf = linalg.cholesky(ops.flip(P, (-2, -1)))  # noqa: N806
    L_inv = ops.flip(Lf, (-2, -1)).transpose(-2, -1)  # noqa: N806
    eye = creation.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return linalg.solve_triangular(L_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=... | precision_matrix=... | scale_tril=...)."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        loc = as_float_tensor(loc)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix}
        name, matrix = next((k, as_float_tensor(v)) for k, v in given.items() if v is not None)
        if matrix.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        if matrix.shape[-1] != matrix.shape[-2] or matrix.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: {name} must be square with the size of loc's last dimension, got "
                             f"{name} of shape {tuple(matrix.shape)} and loc of shape {tuple(loc.shape)}")
        try:
            batch_shape = tuple(np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        except ValueError:  # a RuntimeError too, as PyTorch's
            raise ParameterShapeError(f"MultivariateNormal: the batch shapes of loc {tuple(loc.shape)} and {name} "
                                      f"{tuple(matrix.shape)} do not broadcast") from None
        n = loc.shape[-1]
        self.__dict__[name] = matrix.expand(*batch_shape, n, n)
        self.loc = loc.expand(*batch_shape, n)
        super().__init__(batch_shape, (n,), validate_args)
        # the factor keeps the parameter's own (smaller) batch shape: solves then broadcast instead of repeating
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        n = self._event_shape[0]
        new.loc = self.loc.expand(*batch_shape, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(*batch_shape, n, n)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril  # noqa: N806
        return ops.matmul(L, L.mT).expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return ops.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            *self._batch_shape, *self._event_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h if len(self._batch_shape) == 0 else h.expand(*self._batch_shape)


__all__ = ["MultivariateNormal"]
