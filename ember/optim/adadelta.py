"""`Adadelta`: steps scaled by the ratio of running RMS values of past updates and of gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.optimizer import Optimizer, _effective_grad, _step_counter
from ember.tensor import Tensor


class Adadelta(Optimizer):
    """Adadelta (Zeiler), PyTorch's formulation.

    v = rho * v + (1 - rho) * g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g; u = rho * u + (1 - rho) * delta^2;
    p -= lr * delta.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, capturable=capturable, differentiable=differentiable, has_capturable=True))
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "eps", "weight_decay")
        rho = options.get("rho")
        if rho is not None and not 0.0 <= rho <= 1.0:
            raise self._invalid("rho value", rho, "0 <= rho <= 1")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is not None and not self.state[p]:
                state = self.state[p]
                state["step"] = _step_counter(p)
                state["square_avg"] = ops.zeros_like(p)
                state["acc_delta"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        adadelta(params, [p.grad for p in params], [s["square_avg"] for s in states], [s["acc_delta"] for s in states],
                 [s["step"] for s in states], lr=hp["lr"], rho=hp["rho"], eps=hp["eps"],
                 weight_decay=hp["weight_decay"], maximize=group["maximize"])


def adadelta(params, grads, square_avgs, acc_deltas, state_steps, *, lr, rho, eps, weight_decay,
             maximize: bool) -> None:
    """The Adadelta update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for p, grad, square_avg, acc_delta, step_t in zip(params, grads, square_avgs, acc_deltas, state_steps):
        step_t.add_(1)
        grad = _effective_grad(p, grad, weight_decay, maximize)
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)
