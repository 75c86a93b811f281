"""`RAdam`: Adam whose adaptive step is switched on once its variance estimate is tractable (Liu et al.)."""

from __future__ import annotations

from ember import ops
from ember.optim.optimizer import Optimizer, ParamsT, _decayed_grad, _sqrt, _step_value, defaults_from
from ember.tensor import Tensor


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
        grad = _decayed_grad(p, grads[i], lr, weight_decay, maximize, decoupled_weight_decay)
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


class RAdam(Optimizer):
    """RAdam, PyTorch's formulation.

    With rho_inf = 2 / (1 - beta2) - 1 and rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t): while rho_t <= 5
    the step is plain momentum, p -= lr * m / (1 - beta1^t); after that it is scaled by the rectification
    r_t and sqrt(1 - beta2^t) / (sqrt(v) + eps). `decoupled_weight_decay` decays the parameters directly.
    """

    _nonnegative = ("lr", "eps", "weight_decay")
    _state = ("step", "exp_avg", "exp_avg_sq")
    _functional = staticmethod(radam)

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))
