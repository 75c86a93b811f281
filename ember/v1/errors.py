"""TF1's error types (`tf.errors`), as subclasses of the built-in exceptions users already catch."""

from __future__ import annotations


class OpError(RuntimeError):
    """An operation failed while a graph ran."""


class FailedPreconditionError(OpError):
    """The graph's state does not allow the operation (e.g. reading an uninitialised variable)."""


class InvalidArgumentError(OpError, ValueError):
    """An operation or a feed got an argument it cannot use (a wrong shape or dtype)."""


class NotFoundError(OpError, KeyError):
    """A named operation or tensor does not exist."""
