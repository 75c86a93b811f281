"""`AdamW`: Adam with decoupled weight decay (Loshchilov & Hutter)."""

from __future__ import annotations

from typing import Any

from ember.optim.adam import Adam
from ember.optim.optimizer import ParamsT


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay, outside the moment estimates."""

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, decoupled_weight_decay=True,
                         foreach=foreach, fused=fused, capturable=capturable, differentiable=differentiable)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        # A state saved by Adam still loads as AdamW.
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
