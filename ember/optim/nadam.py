"""`NAdam`: Adam with Nesterov momentum and a momentum schedule (Dozat)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.adam import Adam
from ember.optim.optimizer import Optimizer, _effective_grad, _nonzero, _step_counter, _step_value
from ember.tensor import Tensor


class NAdam(Optimizer):
    """NAdam, PyTorch's formulation.

    mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)); the running product of the mu_t weighs the
    gradient and the first moment separately: p -= lr * ((1 - mu_t) / (1 - prod_t) * g
    + mu_{t+1} / (1 - prod_{t+1}) * m) / (sqrt(v / (1 - beta2^t)) + eps). `decoupled_weight_decay`
    decays the parameters directly (NAdamW).
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=tuple(float(b) for b in betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, capturable=capturable, differentiable=differentiable, has_capturable=True))
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        Adam._check_options(self, options)
        self._require_nonneg(options, "momentum_decay")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is not None and not self.state[p]:
                state = self.state[p]
                state["step"] = _step_counter(p)
                state["mu_product"] = _step_counter(p).add_(1)  # a 0-d tensor of the step's dtype, as PyTorch
                state["exp_avg"] = ops.zeros_like(p)
                state["exp_avg_sq"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        beta1, beta2 = hp["betas"]
        nadam(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
              [s["mu_product"] for s in states], [s["step"] for s in states], beta1=beta1, beta2=beta2, lr=hp["lr"],
              weight_decay=hp["weight_decay"], momentum_decay=hp["momentum_decay"], eps=hp["eps"],
              decoupled_weight_decay=group["decoupled_weight_decay"], maximize=group["maximize"])


def as_state_scalar(value, state: Tensor):
    """`value` as it multiplies 0-d state in place: a Python number as is; a 0-d graph input (ember.jit)
    rounded to the state's dtype first, as the number is when it meets the tensor eagerly."""
    return value if not isinstance(value, Tensor) else value.to(state.dtype)


def nadam(params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps, *, beta1, beta2, lr, weight_decay,
          momentum_decay, eps, decoupled_weight_decay: bool, maximize: bool) -> None:
    """The NAdam update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for i, p in enumerate(params):
        step_t, mu_product = state_steps[i], mu_products[i]
        step_t.add_(1)
        step = _step_value(step_t)
        bias_correction2 = 1 - beta2**step
        if _nonzero(weight_decay) and decoupled_weight_decay:
            p.mul_(1 - lr * weight_decay)
            grad = -grads[i] if maximize else grads[i]
        else:
            grad = _effective_grad(p, grads[i], weight_decay, maximize)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product.mul_(as_state_scalar(mu, mu_product))
        exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
        prod = _step_value(mu_product)
        prod_next = prod * mu_next
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - prod))
        p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - prod_next))


