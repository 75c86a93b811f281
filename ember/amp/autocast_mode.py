"""`autocast`: run matmuls and convolutions in bfloat16 (or float16) and losses in float32, as PyTorch does.

Autocast is an interpreter on the dispatch stack (see ember/interpreter.py): before an op runs, its
`prepare` casts the op's floating inputs by the op's policy (ember/amp/policy.py). The casts are ordinary
ops, so autograd records them and gradients reach float32 parameters in float32, and under `ember.jit`
they become graph nodes. The state (enabled, dtype) is per thread; nested `autocast` blocks save and
restore it, and one interpreter serves them all.
"""

from __future__ import annotations

import functools

from ember import dtypes
from ember.amp import policy
from ember.amp.state import cast_all, on_autocast_device, policy_target, state
from ember.interpreter import Interpreter, find

_DEFAULT_DTYPE = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}


class AutocastInterpreter(Interpreter):
    """Casts each op's inputs by its autocast policy, then hands the op to the interpreter below."""

    casts_inputs = True

    def prepare(self, op, inputs):
        if state.enabled:
            rule = policy.policy_of(op.name)
            if rule is not None and on_autocast_device(inputs):
                target = policy_target(rule, inputs)
                if target is not None:
                    cast = cast_all(inputs, target)
                    if cast is not None:
                        return cast
        return self.below.prepare(op, inputs) if self.below is not None else None

    def jit_key(self):
        return (state.device_type, state.dtype) if state.enabled else None


class autocast:
    """`with em.autocast("cpu", dtype=em.bfloat16):` runs the ops inside in mixed precision (PyTorch's `torch.autocast`).

    Matmul, linear, convolutions, einsum and attention run in `dtype`; losses, `prod` and the linalg
    factorizations in float32; `cat` at its inputs' widest type; other ops in their inputs' dtype.
    float64 tensors are never cast. Also a decorator.
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True, cache_enabled=None):
        if device_type not in _DEFAULT_DTYPE:
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        dtype = _DEFAULT_DTYPE[device_type] if dtype is None else dtype
        if dtype not in (dtypes.bfloat16, dtypes.float16):
            raise ValueError(f"autocast: dtype must be ember.bfloat16 or ember.float16, got {dtype}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self.enabled = bool(enabled)
        self._saved = []

    def __enter__(self):
        self._saved.append((state.enabled, state.dtype, state.device_type, None))
        interp = None
        if self.enabled and find(AutocastInterpreter) is None:
            interp = AutocastInterpreter()
            interp.__enter__()
        self._saved[-1] = self._saved[-1][:3] + (interp,)
        state.enabled, state.dtype, state.device_type = self.enabled, self.fast_dtype, self.device_type
        return self

    def __exit__(self, *exc):
        enabled, dtype, device_type, interp = self._saved.pop()
        state.enabled, state.dtype, state.device_type = enabled, dtype, device_type
        if interp is not None:
            interp.__exit__(*exc)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return run


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on in this thread (for `device_type`, when given)."""
    return state.enabled and (device_type is None or device_type == state.device_type)


def get_autocast_dtype(device_type: str = "cpu"):
    """The dtype autocast casts to on `device_type` (its default when autocast is off)."""
    if state.enabled and state.device_type == device_type:
        return state.dtype
    return _DEFAULT_DTYPE[device_type]
