"""`Adagrad`: per-coordinate learning rates from the accumulated squared gradients."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ember import ops
from ember.grad_mode import no_grad
from ember.ops.dispatch import is_tracing
from ember.optim.optimizer import Optimizer, _effective_grad, _step_counter
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
    ) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)
        # State is created up front, as in PyTorch, so the accumulators exist before the first step
        # (groups added later get theirs at their first step).
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p: Tensor) -> None:
        state = self.state[p]
        state["step"] = _step_counter()
        # PyTorch reads the initial value from the defaults, not from the group.
        state["sum"] = ops.full_like(p, self.defaults["initial_accumulator_value"])

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one Adagrad step; returns the closure's loss if a closure is given."""
        loss = self._eval_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr = float(group["lr"])
                lr_decay = group["lr_decay"]
                eps = group["eps"]
                weight_decay = group["weight_decay"]
                maximize = group["maximize"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        self._init_state(p)
                    step_t = state["step"]
                    step_t.add_(1)
                    step = step_t if is_tracing() else step_t.item()
                    grad = _effective_grad(p, grad, weight_decay, maximize)
                    clr = lr / (1 + (step - 1) * lr_decay)
                    if isinstance(clr, Tensor):
                        clr = clr.to(p.dtype)
                    state_sum = state["sum"]
                    state_sum.add_(grad * grad)
                    std = state_sum.sqrt().add_(eps)
                    p.add_(grad.mul(-clr).div_(std))
        return loss
