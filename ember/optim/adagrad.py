"""`Adagrad`: per-coordinate learning rates from the accumulated squared gradients."""

from __future__ import annotations

from typing import Any

from ember import ops
from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, _step_value, defaults_from
from ember.tensor import Tensor


def adagrad(params, grads, state_sums, state_steps, *, lr, weight_decay, lr_decay, eps, maximize: bool) -> None:
    """The Adagrad update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for p, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps):
        step_t.add_(1)
        step = _step_value(step_t)
        grad = _effective_grad(p, grad, weight_decay, maximize)
        clr = lr / (1 + (step - 1) * lr_decay)
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(eps)
        p.addcdiv_(grad, std, value=-clr)


class Adagrad(Optimizer):
    """Adagrad, PyTorch's formulation.

    s += g^2 (s starts at `initial_accumulator_value`), and p -= clr * g / (sqrt(s) + eps) with
    clr = lr / (1 + (t - 1) * lr_decay).
    """

    _nonnegative = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")
    _state = ("step", "sum")
    _functional = staticmethod(adagrad)

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, defaults_from(locals()))
        # State is created up front, as in PyTorch, so the accumulators exist before the first step
        # (groups added later get theirs at their first step).
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _new_state(self, name: str, param: Tensor, group: dict[str, Any]) -> Tensor:
        if name == "sum":  # PyTorch reads the initial value from the defaults, not from the group
            return ops.full_like(param, self.defaults["initial_accumulator_value"])
        return super()._new_state(name, param, group)
