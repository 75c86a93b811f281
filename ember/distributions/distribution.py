"""`Distribution`: the base of ember.distributions, with PyTorch's interface and argument validation, and the
helpers every distribution shares (broadcast_all, lazy_property, probs/logits conversions)."""

from __future__ import annotations

import numbers

import numpy as np

from ember import creation, dispatch, dtypes, ops
from ember.autograd import grad_mode
from ember.errors import ShapeError
from ember.tensor import Tensor
from ember.type_info import finfo  # the machine limits of a float dtype, bfloat16's too

_VALIDATE_DEFAULT = True

euler_constant = 0.57721566490153286060  # the Euler-Mascheroni constant


def set_default_validate_args(value: bool) -> None:
    """Whether distributions check their parameters and log_prob's values unless told otherwise (default True)."""
    global _VALIDATE_DEFAULT
    if value not in (True, False):
        raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
    _VALIDATE_DEFAULT = value


def resolve_validate_args(validate_args: bool | None) -> bool:
    """Whether a distribution built with this validate_args checks its arguments (None: the default)."""
    return _VALIDATE_DEFAULT if validate_args is None else bool(validate_args)


def _concrete(t) -> bool:
    """Whether t has values to check (not on meta, not symbolic while a graph is built)."""
    return isinstance(t, Tensor) and t.device.type != "meta" and not dispatch.is_symbolic(t)


def _show(t) -> str:
    """How PyTorch names a tensor argument in messages: its value if it has one element, else its shape."""
    if isinstance(t, Tensor) and t.numel() == 1 and _concrete(t):
        return f"{t.item()}" if t.ndim == 0 else f"{t.detach()!r}"
    return f"{tuple(t.shape)}" if isinstance(t, Tensor) else repr(t)


def _flat(message: str) -> str:
    """A message on one line (tensor reprs inside it span several)."""
    return " ".join(message.split())


def _all_true(valid) -> bool:
    return bool(valid.all().item()) if isinstance(valid, Tensor) else bool(np.all(valid))


def check_param(dist, name: str, value, constraint) -> None:
    """PyTorch's ValueError (on one line) when parameter `name` of `dist` breaks `constraint`."""
    if _concrete(value) and not _all_true(constraint.check(value)):
        raise ValueError(_flat(
            f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of distribution {dist!r} "
            f"to satisfy the constraint {constraint!r}, but found invalid values: {value.detach()!r}"))


class lazy_property:
    """A parameter derived from another on first use and then kept (PyTorch's lazy_property: probs from logits)."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with grad_mode.enable_grad():  # derived once, so it must carry the graph back to the given parameter
            value = self.wrapped(instance)
        instance.__dict__[self.__name__] = value
        return value


class BinaryProbsLogits:
    """`probs` and `logits` of a yes/no event's distribution given one of them, each derived from the other on first
    use (Bernoulli, Binomial, Geometric, NegativeBinomial, LogitRelaxedBernoulli)."""

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)


class Distribution:
    """A batch of probability distributions of shape `batch_shape`, each over values of shape `event_shape`."""

    arg_constraints: dict = {}
    has_rsample = False
    has_enumerate_support = False
    support = None
    set_default_validate_args = staticmethod(set_default_validate_args)  # PyTorch's spelling of it

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None) -> None:
        from ember.distributions import constraints

        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = resolve_validate_args(validate_args)
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # bounds that depend on other parameters: the distribution checks them itself
                if name not in self.__dict__ and isinstance(getattr(type(self), name, None), lazy_property):
                    continue  # a parameter derived lazily from the other form (probs from logits)
                check_param(self, name, getattr(self, name, None), constraint)

    def expand(self, batch_shape, _instance=None):
        """The same distributions broadcast to a larger batch_shape (parameters expanded, not copied or re-checked)."""
        # The default expands every parameter named in arg_constraints that the instance holds (each has batch_shape
        # followed by its own event dimensions); distributions with other state override it.
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = tuple(batch_shape)
        nb = len(self._batch_shape)
        for name in self.arg_constraints:
            value = self.__dict__.get(name)
            if isinstance(value, Tensor):
                new.__dict__[name] = value.expand(*(batch_shape + tuple(value.shape[nb:])))
        for name, value in self.__dict__.items():
            if name not in new.__dict__ and not isinstance(value, Tensor):
                new.__dict__[name] = value  # numbers and settings (total_count, temperature as a float, ...)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ is not cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method.")
        return type(self).__new__(type(self)) if _instance is None else _instance

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        """Samples of shape sample_shape + batch_shape + event_shape, with no gradient."""
        with grad_mode.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """Reparameterised samples, differentiable in the parameters (where the distribution has them)."""
        raise NotImplementedError(f"{type(self).__name__} has no rsample (it is not reparameterisable); use sample")

    def sample_n(self, n: int) -> Tensor:
        """n samples (PyTorch's deprecated form of sample((n,)))."""
        return self.sample((n,))

    def log_prob(self, value) -> Tensor:
        """Log density (or mass) of `value`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value) -> Tensor:
        """P(X <= value)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value) -> Tensor:
        """The value whose cdf is `value`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution, along a new first dimension."""
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    def entropy(self) -> Tensor:
        """Entropy of each distribution in the batch."""
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> tuple:
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value: Tensor) -> None:
        """PyTorch's checks of log_prob's argument: broadcastable to the batch, and inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        actual, expected = tuple(value.shape), self._batch_shape + self._event_shape
        if actual[len(actual) - event_dim:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {actual} vs {self._event_shape}.")
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        support = self.support
        if support is None or not _concrete(value):
            return
        if not _all_true(support.check(value)):
            raise ValueError(_flat(f"Expected value argument (Tensor of shape {actual}) to be within the support "
                                   f"({support!r}) of the distribution {self!r}, but found invalid values: "
                                   f"{value.detach()!r}"))

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        return f"{type(self).__name__}({', '.join(f'{k}: {_show(self.__dict__[k])}' for k in names)})"


def as_float_tensor(x, like=None) -> Tensor:
    """A parameter as a floating tensor (numbers take like's dtype, or the default)."""
    if isinstance(x, Tensor):
        return x if x.dtype.is_floating_point else x.to(dtypes.get_default_dtype())
    if not isinstance(x, numbers.Number):
        raise ValueError("Input arguments must all be instances of Number or ember.Tensor.")
    dtype = like.dtype if isinstance(like, Tensor) and like.dtype.is_floating_point else None
    device = like.device if isinstance(like, Tensor) else None
    return creation.tensor(float(x), dtype=dtype, device=device)


class ParameterShapeError(ShapeError, RuntimeError):
    """Parameters whose shapes do not broadcast: a ValueError as Ember's shape errors, a RuntimeError as PyTorch's."""


def broadcast_all(*values, what: str | None = None) -> tuple:
    """Tensors and numbers as floating tensors of one broadcast shape (numbers take the first tensor's dtype)."""
    # `what` names the call in the error for shapes that do not broadcast, as "Normal(loc, scale)"
    like = next((v for v in values if isinstance(v, Tensor) and v.dtype.is_floating_point), None)
    if like is None:
        like = next((v for v in values if isinstance(v, Tensor)), None)
    tensors = [as_float_tensor(v, like) for v in values]
    if len(tensors) == 1:
        return (tensors[0],)
    try:
        return tuple(ops.broadcast_tensors(*tensors))
    except ShapeError:
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        raise ParameterShapeError(f"{what or 'broadcast_all'}: parameters of shapes {shapes} cannot be broadcast "
                                  "together") from None


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities kept in [eps, 1 - eps] of their dtype, so their logs are finite (PyTorch's clamp_probs)."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or log-probabilities of (clamped) probabilities."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """sigmoid(logits) (binary) or softmax over the last dimension."""
    return ops.sigmoid(logits) if is_binary else ops.softmax(logits, -1)


def sum_rightmost(value, dim: int):
    """value summed over its `dim` rightmost dimensions."""
    if dim == 0 or not isinstance(value, Tensor):
        return value
    return value.reshape(*value.shape[: value.ndim - dim], -1).sum(-1)


def _tril_positions(n: int, diag: int) -> np.ndarray:
    # the flat (row-major) positions of an n x n matrix's entries on or below diagonal `diag`, in row order
    rows = np.arange(n)
    return np.flatnonzero(rows < rows[:, None] + (diag + 1))


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of mat's lower triangle (on and below diagonal `diag`) as a vector, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    index = creation.tensor(_tril_positions(n, diag), device=mat.device)
    return ops.index_select(mat.reshape(*mat.shape[:-2], n * n), -1, index)


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The n x n lower-triangular matrix (below diagonal `diag`) holding vec's entries in row order."""
    size = vec.shape[-1]
    # the positive root of n^2 + (1 + 2 diag) n - |diag| (diag + 1) - 2 size = 0
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * size + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > float(finfo(vec.dtype).eps):
        raise ValueError(f"The size of last dimension is {size} which cannot be expressed as the lower triangular "
                         "part of a square D x D matrix.")
    n = round(n)
    # a gather from vec with one zero appended: each position off the triangle reads that zero, so the map is
    # differentiable without writing into a tensor
    source = np.full(n * n, size, dtype=np.int64)
    source[_tril_positions(n, diag)] = np.arange(size)
    padded = ops.cat([vec, vec.new_zeros(*vec.shape[:-1], 1)], -1)
    return ops.index_select(padded, -1, creation.tensor(source, device=vec.device)).reshape(*vec.shape[:-1], n, n)


__all__ = ["Distribution", "ParameterShapeError", "as_float_tensor", "broadcast_all", "check_param", "clamp_probs",
           "euler_constant", "finfo", "lazy_property", "logits_to_probs", "probs_to_logits", "resolve_validate_args",
           "set_default_validate_args", "sum_rightmost", "tril_matrix_to_vec", "vec_to_tril_matrix"]
