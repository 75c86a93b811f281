"""`Adamax`: Adam with the infinity norm of past gradients in place of their root mean square."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.adam import Adam
from ember.optim.optimizer import Optimizer, _effective_grad, _step_counter, _step_value
from ember.tensor import Tensor


class Adamax(Optimizer):
    """Adamax (Kingma & Ba), PyTorch's formulation.

    m = lerp(m, g, 1 - beta1), u = max(beta2 * u, |g| + eps), p -= lr / (1 - beta1^t) * m / u.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=tuple(float(b) for b in betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, capturable=capturable, differentiable=differentiable, has_capturable=True))
        super().__init__(params, defaults)

    _check_options = Adam._check_options

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is not None and not self.state[p]:
                state = self.state[p]
                state["step"] = _step_counter(p)
                state["exp_avg"] = ops.zeros_like(p)
                state["exp_inf"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        beta1, beta2 = hp["betas"]
        adamax(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_inf"] for s in states],
               [s["step"] for s in states], eps=hp["eps"], beta1=beta1, beta2=beta2, lr=hp["lr"],
               weight_decay=hp["weight_decay"], maximize=group["maximize"])


def adamax(params, grads, exp_avgs, exp_infs, state_steps, *, eps, beta1, beta2, lr, weight_decay,
           maximize: bool) -> None:
    """The Adamax update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for p, grad, exp_avg, exp_inf, step_t in zip(params, grads, exp_avgs, exp_infs, state_steps):
        step_t.add_(1)
        grad = _effective_grad(p, grad, weight_decay, maximize)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(ops.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        clr = lr / (1 - beta1 ** _step_value(step_t))
        p.addcdiv_(exp_avg, exp_inf, value=-clr)
