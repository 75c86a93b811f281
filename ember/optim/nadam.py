"""`NAdam`: Adam with Nesterov momentum and a momentum schedule (Dozat)."""

from __future__ import annotations

from typing import Any

from ember.optim.optimizer import Optimizer, ParamsT, _decayed_grad, _step_counter, _step_value, defaults_from
from ember.tensor import Tensor


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
        grad = _decayed_grad(p, grads[i], lr, weight_decay, maximize, decoupled_weight_decay)
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


class NAdam(Optimizer):
    """NAdam, PyTorch's formulation.

    mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)); the running product of the mu_t weighs the
    gradient and the first moment separately: p -= lr * ((1 - mu_t) / (1 - prod_t) * g
    + mu_{t+1} / (1 - prod_{t+1}) * m) / (sqrt(v / (1 - beta2^t)) + eps). `decoupled_weight_decay`
    decays the parameters directly (NAdamW).
    """

    _nonnegative = ("lr", "eps", "weight_decay", "momentum_decay")
    _state = ("step", "mu_product", "exp_avg", "exp_avg_sq")
    _functional = staticmethod(nadam)

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))

    def _new_state(self, name: str, param: Tensor, group: dict[str, Any]) -> Tensor:
        if name == "mu_product":  # a 0-d tensor of the step's dtype, as PyTorch's
            return _step_counter(param, 1.0)
        return super()._new_state(name, param, group)
