"""Whether operations record the autograd graph: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`."""

from __future__ import annotations

import functools
import threading


class _GradState(threading.local):
    enabled = True
    inference = False  # inside inference_mode (which records nothing, as no_grad)


state = _GradState()


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward (thread-local)."""
    return state.enabled


class _GradMode:
    """A context manager that is also a decorator: sets gradient recording to `mode` inside."""

    mode = True

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


class set_grad_enabled(_GradMode):
    """Turn gradient recording on or off: at once when called, for a block, or for a decorated function."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        # As a plain call (PyTorch style) the switch takes effect at once; as a context manager or
        # decorator it is undone on exit.
        self._prev_at_init = state.enabled
        state.enabled = self.mode

    def __enter__(self) -> None:
        self._prev = self._prev_at_init
        state.enabled = self.mode

    def __call__(self, fn):
        state.enabled = self._prev_at_init  # decorating must not change the mode now
        return super().__call__(fn)


class _Switch(_GradMode):
    """Base of no_grad/enable_grad: usable as `with no_grad():`, `@no_grad()` and `@no_grad`."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if fn is None:
            return self
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments, or a function when used as a bare decorator")
        return self(fn)


class no_grad(_Switch):
    """Context manager / decorator: operations inside are not recorded for backward."""

    mode = False


class enable_grad(_Switch):
    """Context manager / decorator: record operations even inside `no_grad`."""

    mode = True


class inference_mode(_GradMode):
    """Context manager / decorator: like `no_grad` (PyTorch's inference mode; `inference_mode(False)` records)."""

    mode = False

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):  # @inference_mode without parentheses
            return self(mode)
        return self

    def __init__(self, mode=True) -> None:
        if not callable(mode):
            self.mode = not bool(mode)

    def __enter__(self) -> None:
        self._prev_inference = state.inference
        state.inference = not self.mode
        super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        state.inference = self._prev_inference

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled, state.inference
            state.enabled, state.inference = mode, not mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled, state.inference = prev

        return wrapper


def is_inference_mode_enabled() -> bool:
    """Whether inference_mode is on in this thread (torch.is_inference_mode_enabled)."""
    return state.inference
