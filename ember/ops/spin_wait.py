"""Waiting for a counter to reach a value by polling it without the GIL (Numba), for batch_threads' hand-offs.

A thread blocked on a lock or a condition is woken by the kernel, which on a virtual machine with an
idle core took 20-40 us here (the hypervisor must resume the halted core): more than a small convolution's
share of work. Polling a counter instead sees a hand-off within a fraction of a microsecond. The poll
reads the counter with an atomic load (thread_intrinsics.load), so the compiler cannot hoist it out of the loop and the
writes made before the counter was raised are visible after, and calls `sched_yield` between reads,
so a thread that needs the core (an OpenBLAS thread, a data-loading thread) is not kept off it. Each
wait is bounded: past its budget the caller falls back to blocking.
"""

from __future__ import annotations

import time

_SOURCE = '''
from ember.ops.thread_intrinsics import load, sched_yield


def wait_at_least(counters, index, value, polls):
    # True once counters[index] >= value, False after `polls` polls
    for _ in range(polls):
        if load(counters, index) >= value:
            return True
        sched_yield()
    return load(counters, index) >= value
'''

_loaded: dict = {}


def waiter():
    """(wait_at_least(counters, index, value, polls) -> bool, polls per microsecond), or None without Numba."""
    if "fn" not in _loaded:
        _loaded["fn"] = load()
    return _loaded["fn"]


def load():
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
