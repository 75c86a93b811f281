"""`ember.memory`: the CPU caching allocator's counters and controls, and graph memory plans.

`stats()` and `empty_cache()` report on and trim the pool the runtime allocates from (plan arenas,
`out=` kernel results, and eager op outputs with `set_eager_pool(True)`); `memory_plan(plan)` and
`validate(plan)` inspect how a graph plan's intermediates share buffers.
"""

from ember.runtime.allocator import (
    eager_pool_enabled,
    empty,
    empty_cache,
    reset_peak_stats,
    set_eager_pool,
    size_class,
    stats,
)
from ember.runtime.memory import MemoryPlan, plan_memory
from ember.runtime.memory_check import validate


def memory_plan(plan, mode: str = "sequential") -> MemoryPlan:
    """The memory plan of a graph `Plan` (see `Plan.memory_plan`)."""
    return plan.memory_plan(mode)


__all__ = [
    "MemoryPlan", "eager_pool_enabled", "empty", "empty_cache", "memory_plan", "plan_memory", "reset_peak_stats",
    "set_eager_pool", "size_class", "stats", "validate",
]
