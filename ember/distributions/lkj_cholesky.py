"""The LKJ distribution over Cholesky factors of correlation matrices, sampled by the onion method."""

from __future__ import annotations

import math

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributions import constraints
from ember.distributions.beta import Beta
from ember.distributions.distribution import Distribution, broadcast_all, finfo
from ember.nn import functional as F
from ember.special import multigammaln
from ember.tensor import Tensor


class LKJCholesky(Distribution):
    """LKJCholesky(dim, concentration): lower Cholesky factors L of dim x dim correlation matrices, with density of
    L L^T proportional to det(L L^T)^(concentration - 1) (uniform over correlation matrices at 1)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # the onion method (Lewandowski, Kurowicka and Joe 2009, sec. 3.2) draws the squared norm of row i's part below
        # the diagonal from Beta(i / 2, concentration + (dim - 2) / 2 - (i - 1) / 2), for all rows at once; row 0
        # draws too (its offset is 0, as row 1's) and that draw is discarded. PyTorch 2.13 takes i - 1/2 for the first
        # parameter, which inflates the correlations of rows 2 and up (variance 0.30 for 0.25 at dim 3, eta 1)
        c = self.concentration
        offset = F.pad(creation.arange(dim - 1, dtype=c.dtype, device=c.device), [1, 0])
        marginal_conc = c + 0.5 * (dim - 2)
        # concentration is checked as LKJCholesky's, so that an error names it rather than the inner Beta
        self._beta = Beta(0.5 * offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset, validate_args=False)
        super().__init__(tuple(c.shape), (dim, dim), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = ops.broadcast_to(self.concentration, batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()) -> Tensor:
        with grad_mode.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = creation.randn(*self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
            # row i's part below the diagonal, uniform on the unit sphere; row 0 has none and stays zero
            rows = u_normal[..., 1:, :]
            rows = rows / rows.norm(dim=-1, keepdim=True)
            u_hypersphere = ops.cat([ops.zeros_like(u_normal[..., :1, :]), rows], -2)
            w = y.sqrt() * u_hypersphere
            # each row has unit norm: the diagonal takes what is left, clamped where rounding leaves nothing
            diag_elems = (1 - w.pow(2).sum(-1)).clamp(min=float(finfo(w.dtype).tiny)).sqrt()
            return w + diag_elems.diag_embed()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        # det(L L^T)^(c - 1) = prod L_ii^(2c - 2), and the Jacobian from L to L L^T is prod L_ii^(D - i): together
        # prod L_ii^(2c - 2 + D - i) over i = 2..D (L_11 = 1)
        c = self.concentration
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = 2 * (c - 1).unsqueeze(-1) + self.dim - creation.arange(2, self.dim + 1, dtype=c.dtype, device=c.device)
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        # the normaliser (Lewandowski, Kurowicka and Joe 2009, p. 1999), with multigammaln's own pi term
        # (D - 1)(D - 2)/4 log(pi) completed to D(D - 1)/4 log(pi)
        dm1 = self.dim - 1
        alpha = c + 0.5 * dm1
        normalize_term = 0.5 * dm1 * math.log(math.pi) + multigammaln(alpha - 0.5, dm1) - alpha.lgamma() * dm1
        return unnormalized_log_pdf - normalize_term


__all__ = ["LKJCholesky"]
