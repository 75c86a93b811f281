"""`Adam`: adaptive moment estimation with bias correction, optional AMSGrad and weight decay."""

from __future__ import annotations

from ember import ops
from ember.optim.fused import FusedUpdate
from ember.optim.optimizer import Optimizer, ParamsT, _decayed_grad, _nonzero, _sqrt, _step_value, defaults_from


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad: bool, beta1, beta2, lr,
         weight_decay, eps, maximize: bool, decoupled_weight_decay: bool = False, fused: bool | None = None) -> None:
    """The Adam (or AdamW) update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit). `fused`: see
    optim/implementation.py.
    """
    update = FusedUpdate("AdamW" if decoupled_weight_decay else "Adam", "fused_adam", adam_update, fused,
                         decay=_nonzero(weight_decay), decoupled=decoupled_weight_decay, maximize=maximize)
    for i, p in enumerate(params):
        step_t = state_steps[i]
        step_t.add_(1)
        # The step's coefficients in Python, as PyTorch computes them (powers and square roots of Python floats).
        step = _step_value(step_t)
        update(p, grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i] if amsgrad else None, lr=lr,
               weight_decay=weight_decay, beta1=beta1, beta2=beta2, eps=eps, step_size=lr / (1 - beta1**step),
               bias_correction2_sqrt=_sqrt(1 - beta2**step))


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, weight_decay, beta1, beta2, eps, step_size,
                bias_correction2_sqrt, decay: bool, decoupled: bool, maximize: bool) -> None:
    """One parameter's Adam step in place, its moments and (unless None) their running maximum with it; `decay`:
    whether weight decay applies, `decoupled`: to the parameter directly (AdamW), not through the gradient.

    The rule of both the tensor-op update and the compiled pass generated from it (fused.py).
    """
    grad = _decayed_grad(param, grad, lr, weight_decay, maximize, decoupled, decay=decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    if max_exp_avg_sq is not None:  # AMSGrad: the running maximum of the second moment takes its place
        max_exp_avg_sq.copy_(ops.maximum(max_exp_avg_sq, exp_avg_sq))
        exp_avg_sq = max_exp_avg_sq
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's formulation.

    m_t = lerp(m_{t-1}, g_t, 1 - beta1), v_t = beta2 * v_{t-1} + (1 - beta2) * g_t^2, and
    p -= lr / (1 - beta1^t) * m_t / (sqrt(v_t) / sqrt(1 - beta2^t) + eps). `amsgrad` uses the
    running maximum of v_t; `decoupled_weight_decay` makes it AdamW.
    """

    _fused_kernel = True
    _nonnegative = ("lr", "eps", "weight_decay")
    _state = ("step", "exp_avg", "exp_avg_sq")
    _optional_state = {"max_exp_avg_sq": "amsgrad"}
    _functional = staticmethod(adam)

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))
