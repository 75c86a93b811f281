"""PyTorch's numeric-precision settings that scripts call at their top: `set_float32_matmul_precision` (kept and
reported; Ember's float32 products are always computed in float32, PyTorch's CPU behaviour too) and
`set_flush_denormal` (not supported: NumPy's kernels keep subnormal numbers, so it answers False, as PyTorch does
where the CPU cannot)."""

from __future__ import annotations

_PRECISIONS = ("highest", "high", "medium")
_state = {"float32_matmul_precision": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 product precision asked for: 'highest', 'high' or 'medium' (the products stay float32)."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {', '.join(_PRECISIONS)}, got {precision!r}")
    _state["float32_matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision set_float32_matmul_precision recorded ('highest' by default)."""
    return _state["float32_matmul_precision"]


def set_flush_denormal(mode: bool) -> bool:
    """Whether subnormal numbers could be flushed to zero here: never (False), whatever `mode` asks."""
    return False
