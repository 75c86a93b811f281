"""The one hook the runtime installs into eager dispatch, composed from the features switched on.

`ember.ops.dispatch.kernel_hook` is None unless the profiler records, the eager pool is on, or
async eager mode is on; dispatch then calls `run_kernel(op, backend, arrays, attrs)` instead of
the kernel, so an eager op costs one attribute check when every feature is off.
"""

from __future__ import annotations

import numpy as np

from ember.ops import dispatch
from ember.runtime import allocator, async_eager, profiler
from ember.runtime.out_kernels import out_kernel_of

# Below this operand size NumPy's own allocation is cheaper than a trip to the pool. The pool pays off
# for big arrays, which glibc maps fresh (pages fault on first touch) instead of reusing freed memory.
EAGER_POOL_MIN_BYTES = 8 << 20


def refresh() -> None:
    """Install the hook if any feature needs it, else remove it."""
    on = profiler.state.active is not None or allocator.eager_pool_enabled() or async_eager.is_async()
    dispatch.kernel_hook = run_kernel if on else None


def run_kernel(op, backend, arrays, attrs, inputs=()):
    """Run an eager kernel with the features that are on (async, pooled output, profiling)."""
    if async_eager.is_async():
        return async_eager.run(op, backend, arrays, attrs, inputs)
    return execute(op, backend, arrays, attrs)


def execute(op, backend, arrays, attrs):
    """Run the kernel now (timed when the profiler records)."""
    rec = profiler.state.active
    if rec is None:
        return compute(op, backend, arrays, attrs)
    t0 = profiler.now()
    out = compute(op, backend, arrays, attrs)
    rec.record(op.name, "eager", arrays, backend.device, t0, profiler.now() - t0)
    return out


def compute(op, backend, arrays, attrs):
    """The kernel's result, into a pooled array when the eager pool is on and the op has an out= kernel."""
    if allocator.eager_pool_enabled() and backend.direct and op.n_outputs == 1:
        out = _pooled(op, arrays, attrs)
        if out is not None:
            return out
    return op.kernel(np, *arrays, **attrs) if backend.direct else backend.run(op.kernel, arrays, attrs)


def _pooled(op, arrays, attrs):
    """The op's result computed into an array from the caching pool (None: no out= kernel fits)."""
    fn = out_kernel_of(op)
    if fn is None or max((getattr(a, "nbytes", 0) for a in arrays), default=0) < EAGER_POOL_MIN_BYTES:
        return None
    try:
        spec = op.infer(*arrays, **attrs)
    except Exception:  # noqa: BLE001 - the ordinary kernel call reports the problem
        return None
    if any(d is None for d in spec.shape):
        return None
    return fn(np, *arrays, out=allocator.empty(spec.shape, spec.dtype), **attrs)
