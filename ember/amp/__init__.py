"""Mixed precision: `autocast` (ops in bfloat16/float16 where it is safe) and `GradScaler` (loss scaling)."""

from ember.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from ember.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]
