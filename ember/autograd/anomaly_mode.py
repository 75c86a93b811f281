"""Anomaly detection, PyTorch's `torch.autograd.detect_anomaly` and `set_detect_anomaly`: while it is on, every node
autograd records keeps the Python stack of the forward call that made it, and backward checks each node's
gradients: a NaN (with check_nan) is an error naming the node, and any error raised in a node's gradient rule is
preceded by a warning holding that forward stack. A debugging mode: recording a stack costs tens of microseconds an op.

The stacks are recorded by an interpreter on the thread's stack (`ember.interpreter`), which `apply` tells about each
node it records; the checks are the engine's (`engine.run_backward`), which asks `state.enabled` once per node.
"""

from __future__ import annotations

import functools
import os
import threading
import traceback
import warnings
import weakref

import numpy as np

from ember.interpreter import Interpreter, push, remove

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _State:
    """Whether anomaly detection is on (for every thread, as PyTorch's), and whether it checks for NaN."""

    enabled = False
    check_nan = True


state = _State()
_traces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> the forward stack that made it
_recorders: dict = {}  # thread id -> the recorder entered by set_detect_anomaly(True) called as a function
_lock = threading.Lock()


class _StackRecorder(Interpreter):
    """Keeps, for each node recorded under it, the stack of the call that made it."""

    sees_nodes = True

    def recorded(self, node) -> None:
        frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(_EMBER_DIR)]
        _traces[node] = "".join(traceback.format_list(frames))
        super().recorded(node)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (torch.is_anomaly_enabled)."""
    return state.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN (torch.is_anomaly_check_nan_enabled)."""
    return state.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off for the program (torch.set_anomaly_enabled); the stacks are recorded in the
    calling thread."""
    with _lock:
        state.enabled, state.check_nan = bool(enabled), bool(check_nan)
        key = threading.get_ident()
        recorder = _recorders.pop(key, None)
        if recorder is not None:
            remove(recorder)
        if enabled:
            recorder = _recorders[key] = _StackRecorder()
            push(recorder)


class detect_anomaly:
    """Anomaly detection for a block or a decorated function (torch.autograd.detect_anomaly)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        self._prev = (state.enabled, state.check_nan)
        self._recorder = _StackRecorder()
        push(self._recorder)
        state.enabled, state.check_nan = True, self.check_nan

    def __exit__(self, *exc) -> None:
        remove(self._recorder)
        state.enabled, state.check_nan = self._prev

    def __call__(self, fn):
        check_nan = self.check_nan

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _Block(check_nan):
                return fn(*args, **kwargs)

        return wrapper


class _Block(detect_anomaly):
    """detect_anomaly without its warning (a decorated function's calls, set_detect_anomaly's blocks)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)


class set_detect_anomaly:
    """Anomaly detection on or off: at once when called, for a block when used with `with`
    (torch.autograd.set_detect_anomaly)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = (state.enabled, state.check_nan)
        self.mode, self.check_nan = bool(mode), bool(check_nan)
        set_anomaly_enabled(self.mode, self.check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(*self._prev)


def check_node(node, grads) -> None:
    """In anomaly mode: an error if `grads` (a node's input gradients) hold a NaN, after a warning with the stack of
    the forward call that made the node."""
    if not state.check_nan:
        return
    for k, g in enumerate(grads):
        data = getattr(g, "_data", None)
        if type(data) is np.ndarray and data.dtype.kind == "f" and np.isnan(data).any():
            report(node)
            raise RuntimeError(f"Function '{node.op.name}Backward' returned nan values in its {k}th output.")


def report(node) -> None:
    """Warn with the stack of the forward call that made `node` (its gradient rule failed or gave NaN)."""
    trace = _traces.get(node)
    where = ("Traceback of forward call that caused the error:\n" + trace if trace
             else "No forward stack was recorded for it (it was made before anomaly detection was on, or in another "
                  "thread).")
    warnings.warn(f"Error detected in {node.op.name}Backward. {where}", stacklevel=2)
