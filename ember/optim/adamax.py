"""`Adamax`: Adam with the infinity norm of past gradients in place of their root mean square."""

from __future__ import annotations

from ember import ops
from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, _step_value, defaults_from


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


class Adamax(Optimizer):
    """Adamax (Kingma & Ba), PyTorch's formulation.

    m = lerp(m, g, 1 - beta1), u = max(beta2 * u, |g| + eps), p -= lr / (1 - beta1^t) * m / u.
    """

    _nonnegative = ("lr", "eps", "weight_decay")
    _state = ("step", "exp_avg", "exp_inf")
    _functional = staticmethod(adamax)

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))
