"""`Adam`: adaptive moment estimation with bias correction, optional AMSGrad and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.optim import implementation
from ember.optim.fused import adam_step, eager, unfused_reason
from ember.optim.optimizer import Optimizer, _effective_grad, _nonzero, _sqrt, _step_counter, _step_value
from ember.tensor import Tensor


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's formulation.

    m_t = lerp(m_{t-1}, g_t, 1 - beta1), v_t = beta2 * v_{t-1} + (1 - beta2) * g_t^2, and
    p -= lr / (1 - beta1^t) * m_t / (sqrt(v_t) / sqrt(1 - beta2^t) + eps). `amsgrad` uses the
    running maximum of v_t; `decoupled_weight_decay` makes it AdamW.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=tuple(float(b) for b in betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        defaults.update(implementation.options(foreach=foreach, fused=fused, capturable=capturable,
                                               differentiable=differentiable, has_fused=True, has_capturable=True))
        super().__init__(params, defaults)

    _fused_kernel = True

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "eps", "weight_decay")
        if options.get("fused") and options.get("amsgrad"):
            raise NotImplementedError(f"{type(self).__name__}: fused=True: the compiled update has no amsgrad; "
                                      "use fused=None")
        betas = options.get("betas")
        if betas is not None:
            if len(betas) != 2:
                raise self._invalid("betas", betas, "a pair (beta1, beta2)")
            for i, beta in enumerate(betas):
                if not 0.0 <= beta < 1.0:
                    raise self._invalid(f"beta parameter at index {i}", beta, "0 <= beta < 1")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = _step_counter(p)
                state["exp_avg"] = ops.zeros_like(p)
                state["exp_avg_sq"] = ops.zeros_like(p)
            if group["amsgrad"] and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        beta1, beta2 = hp["betas"]
        adam(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
             [s.get("max_exp_avg_sq") for s in states], [s["step"] for s in states], amsgrad=group["amsgrad"],
             beta1=beta1, beta2=beta2, lr=hp["lr"], weight_decay=hp["weight_decay"], eps=hp["eps"],
             maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"],
             fused=group.get("fused"))


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad: bool, beta1, beta2, lr,
         weight_decay, eps, maximize: bool, decoupled_weight_decay: bool = False, fused: bool | None = None) -> None:
    """The Adam (or AdamW) update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit). `fused`: see
    optim/implementation.py.
    """
    for i, p in enumerate(params):
        grad = grads[i]
        step_t = state_steps[i]
        step_t.add_(1)
        if fused is not False and not amsgrad:
            if adam_step(p, grad, exp_avgs[i], exp_avg_sqs[i], step=_step_value(step_t), beta1=beta1, beta2=beta2,
                         lr=lr, weight_decay=weight_decay, eps=eps, maximize=maximize, decoupled=decoupled_weight_decay):
                continue  # one compiled pass (fused.py), bit for bit the ops below
            if fused and eager():
                raise implementation.fused_failed("AdamW" if decoupled_weight_decay else "Adam", unfused_reason(
                    (p, grad, exp_avgs[i], exp_avg_sqs[i]), (beta1, beta2, lr, weight_decay, eps)))
        if _nonzero(weight_decay) and decoupled_weight_decay:
            p.mul_(1 - lr * weight_decay)
            grad = -grad if maximize else grad
        else:
            grad = _effective_grad(p, grad, weight_decay, maximize)

        exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

        step = _step_value(step_t)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = _sqrt(bias_correction2)
        if amsgrad:
            max_sq = max_exp_avg_sqs[i]
            max_sq.copy_(ops.maximum(max_sq, exp_avg_sq))
            denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)
