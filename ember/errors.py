"""Ember's error types: subclasses of the built-in exceptions users already catch."""

from __future__ import annotations


class ShapeError(ValueError):
    """An op was given shapes it cannot combine; the message names the op and the shapes."""


class IntegerDivisionByZeroError(RuntimeError, ZeroDivisionError):
    """An integer division or remainder by zero: a RuntimeError as in PyTorch, and a ZeroDivisionError."""


class DeviceMismatchError(RuntimeError):
    """An op was given tensors on different devices."""


class IndexOutOfBoundsError(IndexError, RuntimeError):
    """An index tensor holds a position outside the dimension it indexes. An IndexError, and a RuntimeError as
    PyTorch raises for gather and scatter: code written for either catches it."""


class DtypeError(TypeError, NotImplementedError):
    """An op refuses its input's dtype (an integer tensor to an op defined on floating point, an index tensor of
    a type it does not take). A TypeError; PyTorch raises RuntimeError or NotImplementedError ("not implemented
    for 'Long'"), which both catch it too."""


class InplaceCastError(RuntimeError, TypeError):
    """An in-place op's result cannot be cast into the tensor's dtype (a float into an integer tensor): a RuntimeError
    as PyTorch raises, and a TypeError as NumPy's same-kind refusal is, for ember.numpy's arrays."""


class DomainError(ValueError, RuntimeError):
    """Input values outside an op's domain (binary_cross_entropy's probabilities outside [0, 1]). A ValueError,
    and a RuntimeError as PyTorch raises."""


class DataDependentError(NotImplementedError):
    """An op needs concrete values but its input has none (meta device or a symbolic tensor)."""


class ConcretizationError(TypeError):
    """Python needed a concrete value of a symbolic tensor (while tracing or building a graph)."""


class LinAlgError(RuntimeError):
    """A matrix that an `ember.linalg` op cannot factor: singular, or not positive-definite (torch.linalg.LinAlgError)."""


class CheckpointError(RuntimeError):
    """A checkpoint that can't be read: not a regular file, corrupt, truncated, or not matching its own description."""


def fmt_shape(shape) -> str:
    """Shapes as users write them: (2, 3), with ? for an unknown dimension."""
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
