"""Process-wide runtime switches read by the graph executor: memory planning, parallel runs, remat."""

from __future__ import annotations

from ember import config

_PARALLEL_MODES = ("auto", True, False)
_REMAT_POLICIES = (None, "sqrt")


def set_memory_planning(enabled: bool) -> None:
    """Run graph plans with planned buffers (arenas and out= kernels); on by default."""
    config.MEMORY_PLAN.set(bool(enabled))


def memory_planning_enabled() -> bool:
    """Whether graph plans run with planned buffers."""
    return config.MEMORY_PLAN.get()


def set_parallel(mode) -> None:
    """Run graph plans through the dependency engine: True, False, or "auto" (when it can help)."""
    if mode not in _PARALLEL_MODES:
        raise ValueError(f"set_parallel: expected True, False or 'auto', got {mode!r}")
    config.PARALLEL.set(mode)


def get_parallel():
    """The parallel-run setting: True, False or "auto"."""
    return config.PARALLEL.get()


def set_remat(policy) -> None:
    """Rematerialisation for plans built from now on: None (keep every activation) or "sqrt" (Chen et al.)."""
    if policy not in _REMAT_POLICIES:
        raise ValueError(f"set_remat: expected one of {_REMAT_POLICIES}, got {policy!r}")
    config.REMAT.set(policy)


def get_remat():
    """The rematerialisation policy for new plans."""
    return config.REMAT.get()
