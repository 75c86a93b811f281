"""TF1's error types (`tf.errors`), as subclasses of `OpError` and of the built-in exceptions users already catch.

`OpError` is a `RuntimeError`; each subclass also derives from the built-in exception closest to
its meaning (an invalid argument is a `ValueError`, a missing name a `KeyError`, a read past the
end an `IndexError`, an unimplemented feature a `NotImplementedError`), so code catching either
kind keeps working. (The `OSError` family cannot be combined with `RuntimeError` in one class.)
"""

from __future__ import annotations

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(RuntimeError):
    """An operation failed while a graph ran.

    Made as TF makes it, `OpError(node_def, op, message)`, or with the message alone.
    """

    error_code = UNKNOWN

    def __init__(self, *args) -> None:
        if len(args) >= 3:
            self.node_def, self.op, self.message = args[0], args[1], str(args[2])
            if len(args) > 3 and args[3] is not None:
                self.error_code = args[3]
        else:
            self.node_def = self.op = None
            self.message = str(args[0]) if args else ""
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (type(self), (self.node_def, self.op, self.message, self.error_code))


class CancelledError(OpError):
    """An operation or step was cancelled."""

    error_code = CANCELLED


class UnknownError(OpError):
    """An error of no other kind."""

    error_code = UNKNOWN


class InvalidArgumentError(OpError, ValueError):
    """An operation or a feed got an argument it cannot use (a wrong shape, dtype or value)."""

    error_code = INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    """A deadline expired before the operation could complete."""

    error_code = DEADLINE_EXCEEDED


class NotFoundError(OpError, KeyError):
    """A named operation, tensor, file or checkpoint does not exist."""

    error_code = NOT_FOUND


class AlreadyExistsError(OpError, ValueError):
    """An entity that an operation tried to create already exists."""

    error_code = ALREADY_EXISTS


class PermissionDeniedError(OpError):
    """The caller may not run the operation."""

    error_code = PERMISSION_DENIED


class UnauthenticatedError(OpError):
    """The request has no valid credentials."""

    error_code = UNAUTHENTICATED


class ResourceExhaustedError(OpError):
    """Some resource (memory, quota) ran out."""

    error_code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    """The graph's state does not allow the operation (e.g. reading an uninitialised variable)."""

    error_code = FAILED_PRECONDITION


class AbortedError(OpError):
    """The operation was aborted (typically by a concurrent action)."""

    error_code = ABORTED


class OutOfRangeError(OpError, IndexError):
    """An operation went past the valid range (e.g. reading past the end of an input)."""

    error_code = OUT_OF_RANGE


class UnimplementedError(OpError, NotImplementedError):
    """The operation is not implemented or not supported."""

    error_code = UNIMPLEMENTED


class InternalError(OpError):
    """An invariant of the system broke."""

    error_code = INTERNAL


class UnavailableError(OpError):
    """The runtime is currently unavailable."""

    error_code = UNAVAILABLE


class DataLossError(OpError):
    """Unrecoverable data loss or corruption (e.g. a truncated checkpoint)."""

    error_code = DATA_LOSS
