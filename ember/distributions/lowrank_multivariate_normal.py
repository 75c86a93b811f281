"""The multivariate normal with covariance W W^T + diag(D), computed in O(n m^2) through the capacitance matrix."""

from __future__ import annotations

import math

from ember import creation, linalg, ops
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, as_float_tensor, lazy_property
from ember.distributions.multivariate_normal import batch_mahalanobis, batch_mv
from ember.tensor import Tensor


def _with_identity(K: Tensor) -> Tensor:  # noqa: N803
    return K + creation.eye(K.shape[-1], dtype=K.dtype, device=K.device)


def batch_capacitance_tril(W: Tensor, D: Tensor) -> Tensor:  # noqa: N803
    """The Cholesky factor of I + W^T D^-1 W (m x m)."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)  # noqa: N806
    return linalg.cholesky(_with_identity(ops.matmul(Wt_Dinv, W)))


def batch_lowrank_logdet(W: Tensor, D: Tensor, capacitance_tril: Tensor) -> Tensor:  # noqa: N803
    """log det(W W^T + D) by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def batch_lowrank_mahalanobis(W: Tensor, D: Tensor, x: Tensor, capacitance_tril: Tensor) -> Tensor:  # noqa: N803
    """x^T (W W^T + D)^-1 x by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)  # noqa: N806
    return (x.pow(2) / D).sum(-1) - batch_mahalanobis(capacitance_tril, batch_mv(Wt_Dinv, x))


class LowRankMultivariateNormal(Distribution):
    """LowRankMultivariateNormal(loc, cov_factor (n x m), cov_diag (n))."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args: bool | None = None) -> None:
        loc, cov_factor, cov_diag = (as_float_tensor(t) for t in (loc, cov_factor, cov_diag))
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = ops.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                     cov_diag.unsqueeze(-1))
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(self.loc.shape[:-1], event_shape, validate_args)
        self._capacitance_tril = batch_capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        loc_shape = tuple(batch_shape) + self._event_shape
        new.loc = self.loc.expand(*loc_shape)
        new.cov_diag = self.cov_diag.expand(*loc_shape)
        new.cov_factor = self.cov_factor.expand(*loc_shape, self.cov_factor.shape[-1])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self, t: Tensor, matrix: bool = True) -> Tensor:
        n = self._event_shape
        return t.expand(*self._batch_shape, *n, *(n if matrix else ()))

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        return self._full(self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag, matrix=False)

    @lazy_property
    def scale_tril(self) -> Tensor:
        # D^1/2 chol(I + D^-1/2 W W^T D^-1/2): a Cholesky factor of an n x n matrix that is well conditioned
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / d_sqrt
        k = _with_identity(ops.matmul(dinvsqrt_w, dinvsqrt_w.mT))
        return self._full(d_sqrt * linalg.cholesky(k))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        w = self._unbroadcasted_cov_factor
        return self._full(ops.matmul(w, w.mT) + ops.diag_embed(self._unbroadcasted_cov_diag))

    @lazy_property
    def precision_matrix(self) -> Tensor:
        wt_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = linalg.solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        return self._full(ops.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - ops.matmul(a.mT, a))

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = creation.randn(*w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, diff,
                                      self._capacitance_tril)
        log_det = batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + m)

    def entropy(self) -> Tensor:
        log_det = batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                       self._capacitance_tril)
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return h if len(self._batch_shape) == 0 else h.expand(*self._batch_shape)


__all__ = ["LowRankMultivariateNormal"]
