"""Waiting for a counter to reach a value by polling it without the GIL (Numba), for batch_threads' hand-offs.

A thread blocked on a lock or a condition is woken by the kernel, which on a virtual machine with an
idle core took 20-40 us here (the hypervisor must resume the halted core): more than a small convolution's
share of work. Polling a counter instead sees a hand-off within a fraction of a microsecond. The poll
reads the counter with an atomic acquire load, so the compiler cannot hoist it out of the loop and the
writes made before the counter was raised are visible after, and calls `sched_yield` between reads,
so a thread that needs the core (an OpenBLAS thread, a data-loading thread) is not kept off it. Each
wait is bounded: past its budget the caller falls back to blocking.
"""

from __future__ import annotations

import time

_SOURCE = '''
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _load_acquire(typingctx, counters, index):
    # counters[index] (int64) read with an atomic acquire load
    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        base = builder.bitcast(array.data, ir.IntType(64).as_pointer())
        return builder.load_atomic(builder.gep(base, [args[1]]), "acquire", 8)

    return types.int64(counters, types.intp), codegen


@intrinsic
def _sched_yield(typingctx):
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


def wait_at_least(counters, index, value, polls):
    # True once counters[index] >= value, False after `polls` polls
    for _ in range(polls):
        if _load_acquire(counters, index) >= value:
            return True
        _sched_yield()
    return _load_acquire(counters, index) >= value
'''

_loaded: dict = {}


def waiter():
    """(wait_at_least(counters, index, value, polls) -> bool, polls per microsecond), or None without Numba."""
    if "fn" not in _loaded:
        _loaded["fn"] = _load()
    return _loaded["fn"]


def _load():
    from ember.graph.codegen.numba_cpu import NumbaRenderer, compiled_function

    if not NumbaRenderer().available():
        return None
    import numpy as np

    try:
        fn = compiled_function(_SOURCE, "wait_at_least")
        counters = np.zeros(1, np.int64)
        fn(counters, 0, 1, 1)  # compiles
        polls = 20_000
        start = time.perf_counter()
        fn(counters, 0, 1, polls)
        per_us = polls / max((time.perf_counter() - start) * 1e6, 1e-3)
    except Exception:  # noqa: BLE001 - an LLVM or platform without these: batch_threads blocks instead
        return None
    return fn, per_us
