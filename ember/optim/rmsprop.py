"""`RMSprop`: gradients scaled by a running root mean square, optionally centered and with momentum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.optimizer import Optimizer, _effective_grad, _nonzero, _step_counter
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
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, capturable=capturable, differentiable=differentiable, has_capturable=True))
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "eps", "momentum", "weight_decay", "alpha")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = _step_counter(p)
                state["square_avg"] = ops.zeros_like(p)
            # Created on first use, so turning momentum or centering on later (e.g. by OneCycleLR) works.
            if group["momentum"] > 0 and "momentum_buffer" not in state:
                state["momentum_buffer"] = ops.zeros_like(p)
            if group["centered"] and "grad_avg" not in state:
                state["grad_avg"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        rmsprop(params, [p.grad for p in params], [s["square_avg"] for s in states], [s.get("grad_avg") for s in states],
                [s.get("momentum_buffer") for s in states], [s["step"] for s in states], lr=hp["lr"], alpha=hp["alpha"], eps=hp["eps"],
                weight_decay=hp["weight_decay"], momentum=hp["momentum"], centered=group["centered"],
                maximize=group["maximize"])


def rmsprop(params, grads, square_avgs, grad_avgs, momentum_buffers, state_steps, *, lr, alpha, eps, weight_decay,
            momentum, centered: bool, maximize: bool) -> None:
    """The RMSprop update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for i, p in enumerate(params):
        state_steps[i].add_(1)
        grad = _effective_grad(p, grads[i], weight_decay, maximize)
        square_avg = square_avgs[i]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if centered:
            grad_avg = grad_avgs[i]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg.add_(eps)
        if _nonzero(momentum):
            buf = momentum_buffers[i]
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)
