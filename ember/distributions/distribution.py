"""`Distribution`: the base of ember.distributions, with PyTorch's interface and argument validation."""

from __future__ import annotations

import numpy as np

from ember import creation, dispatch, dtypes
from ember.autograd import grad_mode
from ember.tensor import Tensor

_VALIDATE_DEFAULT = True


def set_default_validate_args(value: bool) -> None:
    """Whether distributions check their parameters and log_prob's values unless told otherwise (default True)."""
    global _VALIDATE_DEFAULT
    if value not in (True, False):
        raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
    _VALIDATE_DEFAULT = value


def _concrete(t) -> bool:
    """Whether t has values to check (not on meta, not symbolic while a graph is built)."""
    return isinstance(t, Tensor) and t.device.type != "meta" and not dispatch.is_symbolic(t)


def _show(t) -> str:
    """How PyTorch names a tensor argument in messages: its value if it has one element, else its shape."""
    if isinstance(t, Tensor) and t.numel() == 1 and _concrete(t):
        return f"{t.item()}" if t.ndim == 0 else f"{t.detach()!r}"
    return f"{tuple(t.shape)}" if isinstance(t, Tensor) else repr(t)


def _one_line(t) -> str:
    return " ".join(repr(t.detach() if isinstance(t, Tensor) else t).split())


class Distribution:
    """A batch of probability distributions of shape `batch_shape`, each over values of shape `event_shape`."""

    arg_constraints: dict = {}
    has_rsample = False
    support = None

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None) -> None:
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = _VALIDATE_DEFAULT if validate_args is None else bool(validate_args)
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if name not in self.__dict__:
                    continue  # a parameter derived lazily from the other form (probs from logits)
                value = getattr(self, name)
                if not _concrete(value):
                    continue
                valid = constraint.check(value)
                if not bool(valid.all().item()):
                    raise ValueError(
                        f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, but found invalid values: {_one_line(value)}")

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

    def log_prob(self, value) -> Tensor:
        """Log density (or mass) of `value`."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """Entropy of each distribution in the batch."""
        raise NotImplementedError

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
        if _concrete(value) and not bool(self.support.check(value).all().item()):
            raise ValueError(f"Expected value argument (Tensor of shape {actual}) to be within the support "
                             f"({self.support!r}) of the distribution {self!r}, but found invalid values: "
                             f"{_one_line(value)}")

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        return f"{type(self).__name__}({', '.join(f'{k}: {_show(self.__dict__[k])}' for k in names)})"


def as_float_tensor(x, like=None) -> Tensor:
    """A parameter as a floating tensor (numbers take like's dtype, or the default)."""
    if isinstance(x, Tensor):
        return x if x.dtype.is_floating_point else x.to(dtypes.get_default_dtype())
    dtype = like.dtype if isinstance(like, Tensor) and like.dtype.is_floating_point else None
    device = like.device if isinstance(like, Tensor) else None
    return creation.tensor(float(x), dtype=dtype, device=device)


def finfo(dtype):
    """NumPy's (or, for bfloat16, ml_dtypes') machine limits of an Ember float dtype."""
    try:
        return np.finfo(dtype.np)
    except ValueError:
        import ml_dtypes

        return ml_dtypes.finfo(dtype.np)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities kept in [eps, 1 - eps] of their dtype, so their logs are finite (PyTorch's clamp_probs)."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


__all__ = ["Distribution", "as_float_tensor", "clamp_probs", "finfo", "set_default_validate_args"]
