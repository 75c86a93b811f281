"""The values of variables, which belong to a Session: two sessions of one graph hold separate values.

A `Session` owns one `VariableValues`. While it runs a graph it binds them (`bind`, a context
variable, so the device parts and engine workers a run starts see them too); the kernels that read
and write variables (`Variable.read_storage`, the assign ops) find them with `current()`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

from ember.v1.errors import FailedPreconditionError

_current: contextvars.ContextVar = contextvars.ContextVar("ember_v1_variable_values", default=None)


class VariableValues:
    """One session's variable storage: an array per initialised Variable."""

    def __init__(self) -> None:
        self._arrays: dict = {}  # Variable -> array
        self._lock = threading.Lock()  # makes read-modify-write updates atomic (use_locking=True)

    def read(self, var):
        """The variable's array; FailedPreconditionError if it was never initialised in this session."""
        try:
            return self._arrays[var]
        except KeyError:
            raise FailedPreconditionError(f"Attempting to use uninitialized value {var.op_name}") from None

    def write(self, var, xp, value, mode: str = "set"):
        """Set, add to or subtract from the variable's array; returns the array."""
        with self._lock:
            cur = self._arrays.get(var)
            if mode == "set":
                if cur is None or tuple(cur.shape) != tuple(value.shape):
                    cur = self._arrays[var] = xp.array(value, dtype=var.spec_dtype, copy=True)
                else:
                    xp.copyto(cur, value, casting="unsafe")
                return cur
            if cur is None:
                raise FailedPreconditionError(f"Attempting to use uninitialized value {var.op_name}")
            ufunc = xp.add if mode == "add" else xp.subtract
            ufunc(cur, value, out=cur, casting="unsafe")
            return cur

    def has(self, var) -> bool:
        """Whether the variable holds a value in this session."""
        return var in self._arrays

    def clear(self) -> None:
        """Drop every value (the session closed)."""
        with self._lock:
            self._arrays.clear()


def current() -> VariableValues:
    """The variable values of the session running the graph in this context."""
    values = _current.get()
    if values is None:
        raise RuntimeError("a variable was read or written outside a Session run: run the graph with Session.run")
    return values


@contextlib.contextmanager
def bind(values: VariableValues) -> Iterator[VariableValues]:
    """Make `values` the variables' storage for the graph runs inside the block."""
    token = _current.set(values)
    try:
        yield values
    finally:
        _current.reset(token)
