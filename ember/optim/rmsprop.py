"""`RMSprop`: gradients scaled by a running root mean square, optionally centered and with momentum."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ember import ops
from ember.grad_mode import no_grad
from ember.optim.optimizer import Optimizer, _effective_grad, _lerp_, _step_counter
from ember.tensor import Tensor


class RMSprop(Optimizer):
    """RMSprop, PyTorch's formulation.

    v = alpha * v + (1 - alpha) * g^2; with `centered`, the running mean gbar of g is tracked and
    v - gbar^2 is used; the step is g / (sqrt(v) + eps), through a momentum buffer when momentum > 0.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "eps", "momentum", "weight_decay", "alpha")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one RMSprop step; returns the closure's loss if a closure is given."""
        loss = self._eval_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = float(group["lr"])
        alpha = group["alpha"]
        eps = group["eps"]
        weight_decay = group["weight_decay"]
        momentum = group["momentum"]
        centered = group["centered"]
        maximize = group["maximize"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = _step_counter()
                state["square_avg"] = ops.zeros_like(p)
            # Created on first use, so turning momentum or centering on later (e.g. by OneCycleLR) works.
            if momentum > 0 and "momentum_buffer" not in state:
                state["momentum_buffer"] = ops.zeros_like(p)
            if centered and "grad_avg" not in state:
                state["grad_avg"] = ops.zeros_like(p)
            state["step"].add_(1)
            grad = _effective_grad(p, grad, weight_decay, maximize)

            square_avg = state["square_avg"]
            square_avg.mul_(alpha).add_(grad.mul(1 - alpha).mul_(grad))
            if centered:
                grad_avg = state["grad_avg"]
                _lerp_(grad_avg, grad, 1 - alpha)
                avg = (square_avg - grad_avg * grad_avg).sqrt()
            else:
                avg = square_avg.sqrt()
            avg.add_(eps)

            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).add_(grad / avg)
                p.add_(buf, alpha=-lr)
            else:
                p.add_(grad.mul(-lr).div_(avg))
