"""Process-wide runtime switches read by the graph executor: memory planning, parallel runs, remat."""

from __future__ import annotations

import os

_PARALLEL_MODES = ("auto", True, False)
_REMAT_POLICIES = (None, "sqrt")


def _env_flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    return v.lower() not in ("0", "false", "no", "off")


class _Settings:
    memory = _env_flag("EMBER_MEMORY_PLAN", True)  # run plans with arenas and out= kernels
    parallel = "auto" if os.environ.get("EMBER_PARALLEL", "auto") == "auto" else _env_flag("EMBER_PARALLEL", False)
    remat = os.environ.get("EMBER_REMAT") if os.environ.get("EMBER_REMAT") in _REMAT_POLICIES else None


settings = _Settings()


def set_memory_planning(enabled: bool) -> None:
    """Run graph plans with planned buffers (arenas and out= kernels); on by default."""
    settings.memory = bool(enabled)


def memory_planning_enabled() -> bool:
    """Whether graph plans run with planned buffers."""
    return settings.memory


def set_parallel(mode) -> None:
    """Run graph plans through the dependency engine: True, False, or "auto" (when it can help)."""
    if mode not in _PARALLEL_MODES:
        raise ValueError(f"set_parallel: expected True, False or 'auto', got {mode!r}")
    settings.parallel = mode


def get_parallel():
    """The parallel-run setting: True, False or "auto"."""
    return settings.parallel


def set_remat(policy) -> None:
    """Rematerialisation for plans built from now on: None (keep every activation) or "sqrt" (Chen et al.)."""
    if policy not in _REMAT_POLICIES:
        raise ValueError(f"set_remat: expected one of {_REMAT_POLICIES}, got {policy!r}")
    settings.remat = policy


def get_remat():
    """The rematerialisation policy for new plans."""
    return settings.remat
