"""`GradScaler`: loss scaling for float16 training, with PyTorch's semantics (scale, unscale_, step, update).

The loss is multiplied by a scale so that small float16 gradients do not flush to zero; before the
optimizer steps, the gradients are divided by it again. A step whose gradients hold an inf or a NaN is
skipped and the scale shrinks; after `growth_interval` clean steps it grows.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np

from ember import creation, dtypes, ops
from ember.autograd import grad_mode
from ember.tensor import Tensor


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """Dynamic loss scaling (PyTorch's `torch.amp.GradScaler`)."""

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor should be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval should be a positive integer, got {growth_interval}")
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict] = {}

    # --- scaling ----------------------------------------------------------------------------------
    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) multiplied by the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * creation.tensor(self._scale, dtype=dtypes.float32, device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _Stage.READY, "found_inf": 0.0})

    def unscale_(self, optimizer) -> None:
        """Divide `optimizer`'s gradients by the scale in place, and note whether any is inf or NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")

        inv_scale = float(np.float32(1.0 / np.float64(self._scale)))  # PyTorch: reciprocal in double, then float
        found = False
        with grad_mode.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad
                    if g.dtype == dtypes.float16:  # PyTorch's rule: scaled float16 gradients are already lossy
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if not found and not bool(ops.isfinite(g).all()):
                        found = True
                    g.mul_(inv_scale)
        st["found_inf"] = 1.0 if found else 0.0
        st["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step()` unless the unscaled gradients hold an inf or a NaN (then the step is skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = None
        if not st["found_inf"]:
            result = optimizer.step(*args, **kwargs)
        st["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Shrink the scale after a skipped step, grow it after `growth_interval` clean ones (or set `new_scale`)."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
            self._scale = value
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf = any(st["found_inf"] for st in self._per_optimizer.values())
            scale = np.float32(self._scale)
            if found_inf:
                self._scale = float(scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = scale * np.float32(self._growth_factor)
                    if math.isfinite(float(grown)):
                        self._scale = float(grown)
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # --- inspection and state -----------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a skipped step."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale shrinks by."""
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """Clean steps before the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the clean steps before the scale grows."""
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        """Whether scaling is on."""
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (PyTorch's keys)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what `state_dict` returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled instance "
                               "of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
