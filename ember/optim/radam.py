"""`RAdam`: Adam whose adaptive step is switched on once its variance estimate is tractable (Liu et al.)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.adam import Adam
from ember.optim.optimizer import Optimizer, _effective_grad, _nonzero, _sqrt, _step_counter, _step_value
from ember.tensor import Tensor


class RAdam(Optimizer):
    """RAdam, PyTorch's formulation.

    With rho_inf = 2 / (1 - beta2) - 1 and rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t): while rho_t <= 5
    the step is plain momentum, p -= lr * m / (1 - beta1^t); after that it is scaled by the rectification
    r_t and sqrt(1 - beta2^t) / (sqrt(v) + eps). `decoupled_weight_decay` decays the parameters directly.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=tuple(float(b) for b in betas), eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
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
                state["exp_avg_sq"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        beta1, beta2 = hp["betas"]
        radam(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
              [s["step"] for s in states], beta1=beta1, beta2=beta2, lr=hp["lr"], weight_decay=hp["weight_decay"],
              eps=hp["eps"], decoupled_weight_decay=group["decoupled_weight_decay"], maximize=group["maximize"])


def radam(params, grads, exp_avgs, exp_avg_sqs, state_steps, *, beta1, beta2, lr, weight_decay, eps,
          decoupled_weight_decay: bool, maximize: bool) -> None:
    """The RAdam update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit). Whether the
    rectified step applies depends on the step count: eagerly a Python branch, in a trace a `where`
    over both (the chosen value is computed the same way in both, so they agree bit for bit).
    """
    for i, p in enumerate(params):
        step_t = state_steps[i]
        step_t.add_(1)
        step = _step_value(step_t)
        if _nonzero(weight_decay) and decoupled_weight_decay:
            p.mul_(1 - lr * weight_decay)
            grad = -grads[i] if maximize else grads[i]
        else:
            grad = _effective_grad(p, grads[i], weight_decay, maximize)
        exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        bias_corrected_exp_avg = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if isinstance(rho_t, Tensor):
            # (the radicand is clamped only where rho_t <= 5, whose rectification is not used)
            rect = _sqrt(ops.clamp_min((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t),
                                       0.0))
            adaptive = _sqrt(bias_correction2) / exp_avg_sq.sqrt().add_(eps)
            update = ops.where(rho_t > 5.0, adaptive * rect, 1.0)
        elif rho_t > 5.0:
            rect = _sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            update = _sqrt(bias_correction2) / exp_avg_sq.sqrt().add_(eps) * rect
        else:
            update = 1.0
        p.add_(bias_corrected_exp_avg * lr * update, alpha=-1.0)
