"""The autocast state of this thread, and the cast rule for functions composed of several ops.

This module imports nothing from the layers above the ops, so `nn.functional` can mark its composite
functions (losses, attention) with the precision PyTorch's autocast gives them.
"""

from __future__ import annotations

import functools
import threading


class _State(threading.local):
    enabled: bool = False
    dtype = None  # the lower-precision dtype (ember.bfloat16 or ember.float16) while enabled
    device_type: str = "cpu"


state = _State()


def eligible(t) -> bool:
    """Whether autocast may cast tensor `t`: float16, bfloat16 or float32 (float64 is left alone, as in PyTorch)."""
    from ember import dtypes

    return t.dtype in (dtypes.float32, dtypes.float16, dtypes.bfloat16)


def cast_all(args, target):
    """args with every eligible tensor not already `target` cast to it; None when nothing changes."""
    from ember.tensor import Tensor

    changed = False
    out = []
    for x in args:
        if isinstance(x, Tensor) and eligible(x) and x.dtype != target:
            x = x.to(target)
            changed = True
        out.append(x)
    return out if changed else None


def policy_target(policy: str, args):
    """The dtype `policy` ('lower', 'fp32' or 'promote') casts `args` to under the current state, or None."""
    from ember import dtypes
    from ember.tensor import Tensor

    if policy == "lower":
        return state.dtype
    if policy == "fp32":
        return dtypes.float32
    kinds = {x.dtype for x in args if isinstance(x, Tensor) and eligible(x)}
    if len(kinds) < 2:
        return None
    return dtypes.float32  # any mix of float32, float16 and bfloat16 meets in float32


def on_autocast_device(values) -> bool:
    """Whether the first tensor among `values` is on the device type autocast is for (autocast("cuda")
    leaves CPU ops alone)."""
    for x in values:
        device = getattr(x, "_device", None)
        if device is not None:
            return device.type == state.device_type
    return False


def autocast_function(policy: str):
    """Decorate a function built of several ops (a loss, attention) to run in `policy`'s precision under autocast.

    'fp32': floating tensor arguments are cast to float32 first (PyTorch's losses); 'lower': to the
    autocast dtype (attention). Outside autocast the function runs as it is.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not state.enabled or not on_autocast_device((*args, *kwargs.values())):
                return fn(*args, **kwargs)
            target = policy_target(policy, args)
            if target is not None:
                args = cast_all(args, target) or args
                cast_kw = cast_all(list(kwargs.values()), target)
                if cast_kw is not None:
                    kwargs = dict(zip(kwargs, cast_kw))
            # as in PyTorch, the ops inside run without autocast: they see the inputs cast once, here
            state.enabled = False
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = True

        return run

    return wrap
