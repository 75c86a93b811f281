"""The runtime: dependency engine and threads, memory planning and caching allocator, profiler,
rematerialisation (`checkpoint`) and async eager execution.

Imports flow downward: the graph executor and eager dispatch use this package; it uses the tensor,
autograd, ops and backends, and reaches the graph layer only lazily (checkpoint inside a trace).
"""

from __future__ import annotations

from ember.runtime.allocator import empty_cache, set_eager_pool, stats
from ember.runtime.async_eager import is_async, set_async, synchronize
from ember.runtime.engine import EngineError, get_engine, wait_for_all
from ember.runtime.settings import (
    get_parallel,
    get_remat,
    memory_planning_enabled,
    set_memory_planning,
    set_parallel,
    set_remat,
)
from ember.runtime.threads import get_num_interop_threads, set_num_interop_threads

__all__ = [
    "EngineError", "empty_cache", "get_engine", "get_num_interop_threads", "get_parallel", "get_remat",
    "memory_planning_enabled", "set_eager_pool", "set_memory_planning", "set_num_interop_threads", "set_parallel",
    "set_remat", "stats", "wait_for_all", "set_async", "is_async", "synchronize",
]
