"""Bijections with log-Jacobians for TransformedDistribution (torch.distributions.transforms)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ember import creation, linalg, ops
from ember.distributions import constraints
from ember.distributions.distribution import (
    broadcast_all,
    finfo,
    lazy_property,
    sum_rightmost,
    tril_matrix_to_vec,
    vec_to_tril_matrix,
)
from ember.nn import functional as F
from ember.tensor import Tensor


def _shape_of(x) -> tuple:
    return tuple(x.shape) if isinstance(x, Tensor) else ()


class Transform:
    """An invertible map y = t(x) with log|dy/dx| (`log_abs_det_jacobian`); `inv` is its inverse."""

    # cache_size=1 remembers the last (x, y) pair, so inverting a sample just drawn returns the x it came from

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        self._cached_x_y = (None, None)

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign (it is not monotonic)")

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def log_abs_det_jacobian(self, x, y):
        """log |dy/dx| at the pair (x, y = t(x))."""
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def forward_shape(self, shape) -> tuple:
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        return tuple(shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    """The inverse of a transform (what `t.inv` returns); its inverse is t itself."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self) -> bool:
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape) -> tuple:
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape) -> tuple:
        return self._inv.forward_shape(shape)

    def __repr__(self) -> str:
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """parts applied in order: parts[0] first."""

    def __init__(self, parts: list, cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim  # the event dims the input needs, traced back from the output
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @lazy_property
    def bijective(self) -> bool:
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv, inv._inv = inv, self
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return ops.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total = 0
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            total = total + sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape) -> tuple:
        for part in self.parts:
            shape = part.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return tuple(shape)

    def __repr__(self) -> str:
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """base_transform with reinterpreted_batch_ndims batch dimensions treated as event dimensions."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape) -> tuple:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape) -> tuple:
        return self.base_transform.inverse_shape(shape)

    def __repr__(self) -> str:
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent, on positive x."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool((self.exponent == other.exponent).all().item())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape) -> tuple:
        return tuple(np.broadcast_shapes(tuple(shape), _shape_of(self.exponent)))

    def inverse_shape(self, shape) -> tuple:
        return tuple(np.broadcast_shapes(tuple(shape), _shape_of(self.exponent)))


def _clipped_sigmoid(x):
    # sigmoid kept strictly inside (0, 1), so the inverse and the log-Jacobian stay finite
    info = finfo(x.dtype)
    return ops.sigmoid(x).clamp(min=float(info.tiny), max=1.0 - float(info.eps))


class SigmoidTransform(Transform):
    """y = sigmoid(x)."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        info = finfo(y.dtype)
        y = y.clamp(min=float(info.tiny), max=1.0 - float(info.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) in a form that stays accurate for large |x|
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x| (not injective: its inverse returns the positive root)."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other) -> bool:
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over event_dim trailing dimensions."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                if a != b:
                    return False
            elif not bool((a == b).all().item()):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Number):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Number):
            result = ops.full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = result.reshape(*result.shape[: result.ndim - self.event_dim], -1).sum(-1)
            shape = shape[: len(shape) - self.event_dim]
        return result.expand(*shape)

    def forward_shape(self, shape) -> tuple:
        return tuple(np.broadcast_shapes(tuple(shape), _shape_of(self.loc), _shape_of(self.scale)))

    def inverse_shape(self, shape) -> tuple:
        return tuple(np.broadcast_shapes(tuple(shape), _shape_of(self.loc), _shape_of(self.scale)))


class SoftmaxTransform(Transform):
    """y = softmax(x) over the last dimension (not bijective: the inverse gives log-probabilities)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other) -> bool:
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape)


class StickBreakingTransform(Transform):
    """Unconstrained K-vectors to the (K+1)-simplex by stick breaking: each sigmoid takes a share of what is left."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    @staticmethod
    def _offset(x, k: int):
        # log(k), log(k - 1), ..., log(1) centre the logits, so x = 0 maps to the uniform point of the simplex
        return (k + 1 - x.new_ones(k).cumsum(-1)).log()

    def _call(self, x):
        z = _clipped_sigmoid(x - self._offset(x, x.shape[-1]))
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        # the stick left before each break; kept positive where y's last entry is ~0 or the others sum to ~1
        sf = (1 - y_crop.cumsum(-1)).clamp(min=float(finfo(y.dtype).tiny))
        return y_crop.log() - sf.log() + self._offset(y, y_crop.shape[-1])

    def log_abs_det_jacobian(self, x, y):
        x = x - self._offset(x, x.shape[-1])
        # the Jacobian is triangular with dy_i/dx_i = y_i (1 - z_i), and log(1 - sigmoid(x)) = -x + logsigmoid(x)
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal: tril(x, -1) + diag(exp(x))."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones, L L^T with L = LowerCholeskyTransform()(x)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 to Cholesky factors of D x D correlation matrices (rows of unit
    norm, positive diagonal): tanh, then a signed stick breaking of each row's squares."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = float(finfo(x.dtype).eps)
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # y = sign(r) sqrt(z * prod(1 - z) before it) = r * sqrt(prod(1 - r^2) before it), for z = r^2
        z1m_cumprod_sqrt = (1 - r.pow(2)).sqrt().cumprod(-1)
        r = r + creation.eye(r.shape[-1], dtype=r.dtype, device=r.device)  # the diagonal entries start at 1
        return r * F.pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = F.pad(y_cumsum[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2  # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        # the domain and codomain differ in dimension: this is the log-determinant of the map from x to y's strict
        # lower triangle. Diagonal -2 picks the stick left before each entry without shifting the cumulative sums.
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape) -> tuple:
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


class ReshapeTransform(Transform):
    """The rightmost in_shape of a tensor reshaped to out_shape (unit Jacobian)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0) -> None:
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        return x.reshape(*x.shape[: x.ndim - len(self.in_shape)], *self.out_shape)

    def _inverse(self, y):
        return y.reshape(*y.shape[: y.ndim - len(self.out_shape)], *self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[: x.ndim - len(self.in_shape)]))

    def forward_shape(self, shape) -> tuple:
        if len(shape) < len(self.in_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.in_shape)
        if tuple(shape[cut:]) != self.in_shape:
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {self.in_shape}")
        return tuple(shape[:cut]) + self.out_shape

    def inverse_shape(self, shape) -> tuple:
        if len(shape) < len(self.out_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.out_shape)
        if tuple(shape[cut:]) != self.out_shape:
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {self.out_shape}")
        return tuple(shape[:cut]) + self.in_shape


def _check_dim(t, dim: int, size: int, what: str, name: str) -> None:
    # PyTorch's AssertionErrors when dim does not index t, or t's size along it is not what the parts cover
    if not -t.ndim <= dim < t.ndim:
        raise AssertionError(f"dim {dim} out of range for {name} with {t.ndim} dimensions")
    if t.shape[dim] != size:
        raise AssertionError(f"{name}.size({dim}) = {t.shape[dim]} must equal {what} {size}")


class CatTransform(Transform):
    """transforms[i] applied to the i-th block of lengths[i] entries along dim (the blocks torch.cat would join)."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")
        self.dim = dim

    @property
    def event_dim(self) -> int:
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _blocks(self, t):
        start = 0
        for length in self.lengths:
            yield t.narrow(self.dim, start, length)
            start = start + length

    def _call(self, x):
        _check_dim(x, self.dim, self.length, "length", "x")
        return ops.cat([t(block) for t, block in zip(self.transforms, self._blocks(x))], self.dim)

    def _inverse(self, y):
        _check_dim(y, self.dim, self.length, "length", "y")
        return ops.cat([t.inv(block) for t, block in zip(self.transforms, self._blocks(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_dim(x, self.dim, self.length, "length", "x")
        _check_dim(y, self.dim, self.length, "length", "y")
        parts = []
        for t, xb, yb in zip(self.transforms, self._blocks(x), self._blocks(y)):
            part = t.log_abs_det_jacobian(xb, yb)
            if t.event_dim < self.event_dim:
                part = sum_rightmost(part, self.event_dim - t.event_dim)
            parts.append(part)
        # dim counted from the right of the log-Jacobians: a batch dim keeps the blocks apart, an event dim sums them
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        return ops.cat(parts, dim) if dim < 0 else sum(parts)

    @property
    def bijective(self) -> bool:
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """transforms[i] applied to the i-th slice along dim (the slices torch.stack would join)."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        _check_dim(x, self.dim, len(self.transforms), "len(transforms)", "x")
        return ops.stack([t(s) for s, t in zip(self._slice(x), self.transforms)], self.dim)

    def _inverse(self, y):
        _check_dim(y, self.dim, len(self.transforms), "len(transforms)", "y")
        return ops.stack([t.inv(s) for s, t in zip(self._slice(y), self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_dim(x, self.dim, len(self.transforms), "len(transforms)", "x")
        _check_dim(y, self.dim, len(self.transforms), "len(transforms)", "y")
        parts = zip(self._slice(x), self._slice(y), self.transforms)
        return ops.stack([t.log_abs_det_jacobian(xs, ys) for xs, ys, t in parts], self.dim)

    @property
    def bijective(self) -> bool:
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), onto the unit interval (a Gaussian copula is an MVN pushed through Normal's cdf)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform", "Transform",
           "identity_transform"]
