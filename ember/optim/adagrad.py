"""`Adagrad`: per-coordinate learning rates from the accumulated squared gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.optimizer import Optimizer, _effective_grad, _step_counter, _step_value
from ember.tensor import Tensor


class Adagrad(Optimizer):
    """Adagrad, PyTorch's formulation.

    s += g^2 (s starts at `initial_accumulator_value`), and p -= clr * g / (sqrt(s) + eps) with
    clr = lr / (1 + (t - 1) * lr_decay).
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, fused=fused, differentiable=differentiable, has_fused=True))
        super().__init__(params, defaults)
        # State is created up front, as in PyTorch, so the accumulators exist before the first step
        # (groups added later get theirs at their first step).
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p: Tensor) -> None:
        state = self.state[p]
        state["step"] = _step_counter(p)
        # PyTorch reads the initial value from the defaults, not from the group.
        state["sum"] = ops.full_like(p, self.defaults["initial_accumulator_value"])

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is not None and not self.state[p]:
                self._init_state(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        adagrad(params, [p.grad for p in params], [s["sum"] for s in states], [s["step"] for s in states], lr=hp["lr"], weight_decay=hp["weight_decay"], lr_decay=hp["lr_decay"],
                eps=hp["eps"], maximize=group["maximize"])


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
