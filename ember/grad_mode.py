"""Whether operations record the autograd graph: `no_grad`, `enable_grad`, `set_grad_enabled`."""

from __future__ import annotations

import functools
import threading


class _GradState(threading.local):
    enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward (thread-local)."""
    return state.enabled


class set_grad_enabled:
    """Context manager and decorator that turns gradient recording on or off."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._prev: list[bool] = []
        # As a plain call (PyTorch style), the switch takes effect at once.
        self._prev_at_init = state.enabled
        state.enabled = self.mode

    def __enter__(self) -> None:
        self._prev.append(self._prev_at_init)
        state.enabled = self.mode

    def __exit__(self, *exc) -> None:
        state.enabled = self._prev.pop()

    def __call__(self, fn):
        state.enabled = self._prev_at_init  # decorating must not change the mode now
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled
            state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev

        return wrapper


class _GradSwitch:
    """Base of no_grad/enable_grad: a context manager that is also a decorator (`@no_grad` or `@no_grad()`)."""

    mode = True

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if fn is None:
            return self
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments, or a function when used as a bare decorator")
        return self(fn)

    def __enter__(self) -> None:
        self._prev = state.enabled
        state.enabled = self.mode

    def __exit__(self, *exc) -> None:
        state.enabled = self._prev

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled
            state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev

        return wrapper


class no_grad(_GradSwitch):
    """Context manager / decorator: operations inside are not recorded for backward."""

    mode = False


class enable_grad(_GradSwitch):
    """Context manager / decorator: record operations even inside `no_grad`."""

    mode = True
