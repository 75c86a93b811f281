"""`Adam`: adaptive moment estimation with bias correction, optional AMSGrad and weight decay."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ember import ops
from ember.grad_mode import no_grad
from ember.ops.dispatch import is_tracing
from ember.optim.optimizer import Optimizer, _effective_grad, _lerp_, _step_counter
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
    ) -> None:
        defaults = dict(lr=lr, betas=tuple(float(b) for b in betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "eps", "weight_decay")
        betas = options.get("betas")
        if betas is not None:
            if len(betas) != 2:
                raise self._invalid("betas", betas, "a pair (beta1, beta2)")
            for i, beta in enumerate(betas):
                if not 0.0 <= beta < 1.0:
                    raise self._invalid(f"beta parameter at index {i}", beta, "0 <= beta < 1")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one Adam step; returns the closure's loss if a closure is given."""
        loss = self._eval_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = float(group["lr"])
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        weight_decay = group["weight_decay"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = _step_counter()
                state["exp_avg"] = ops.zeros_like(p)
                state["exp_avg_sq"] = ops.zeros_like(p)
            if amsgrad and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = ops.zeros_like(p)
            step_t = state["step"]
            step_t.add_(1)
            # Under ember.jit the step count is only known when the graph runs: keep it a tensor.
            step = step_t if is_tracing() else step_t.item()

            if weight_decay != 0 and decoupled:
                p.mul_(1 - lr * weight_decay)
                grad = -grad if maximize else grad
            else:
                grad = _effective_grad(p, grad, weight_decay, maximize)

            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            _lerp_(exp_avg, grad, 1 - beta1)
            # v = beta2 * v + ((1 - beta2) * g) * g, the rounding order of PyTorch's addcmul.
            exp_avg_sq.mul_(beta2).add_(grad.mul(1 - beta2).mul_(grad))

            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            if isinstance(step, Tensor):
                step_size = step_size.to(p.dtype)
                bias_correction2_sqrt = bias_correction2_sqrt.to(p.dtype)

            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                max_sq.copy_(ops.maximum(max_sq, exp_avg_sq))
                denom = max_sq.sqrt()
            else:
                denom = exp_avg_sq.sqrt()
            denom.div_(bias_correction2_sqrt).add_(eps)
            # p += (-step_size * m) / denom, the rounding order of PyTorch's addcdiv.
            p.add_(exp_avg.mul(-step_size).div_(denom) if not isinstance(step_size, Tensor)
                   else (exp_avg * (-step_size)).div_(denom))
