"""`Adafactor`: Adam-like steps whose second moment of a matrix is kept as row and column factors (Shazeer & Stern)."""

from __future__ import annotations

from typing import Any

from ember import ops
from ember.optim.optimizer import Optimizer, ParamsT, _nonzero, _step_counter, _step_value, defaults_from
from ember.tensor import Tensor
from ember.type_info import finfo


def _min(a, b):
    """min(a, b): Python's eagerly (as PyTorch computes it), a 0-d tensor where either is one (ember.jit)."""
    if isinstance(a, Tensor):
        return ops.minimum(a, b)
    return ops.minimum(b, a) if isinstance(b, Tensor) else min(a, b)


def _max(a, b):
    """max(a, b): Python's eagerly (as PyTorch computes it), a 0-d tensor where either is one (ember.jit)."""
    if isinstance(a, Tensor):
        return ops.maximum(a, b)
    return ops.maximum(b, a) if isinstance(b, Tensor) else max(a, b)


def _mean_square(grad: Tensor, dim: int) -> Tensor:
    """The mean of grad**2 along `dim`, kept, computed as PyTorch's Adafactor does (a norm squared over the size)."""
    return ops.norm(grad, dim=dim, keepdim=True).square_().div_(grad.shape[dim])


def adafactor(params, grads, row_vars, col_vars, variances, state_steps, *, d, lr, beta2_decay, weight_decay, eps1,
              eps2, maximize: bool) -> None:
    """The Adafactor update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit), where the norms PyTorch
    reads with `.item()` stay 0-d tensors. `eps1` None: the machine epsilon of the first parameter's dtype.
    """
    for i, param in enumerate(params):
        grad = -grads[i] if maximize else grads[i]
        step_t = state_steps[i]
        if eps1 is None:
            # Set once for the whole group, from its first parameter, as PyTorch's loop does.
            eps1 = finfo(param.dtype).eps
        step_t.add_(1)
        step = _step_value(step_t)
        one_minus_beta2_t = step**beta2_decay
        rho_t = _min(lr, 1 / (step**0.5))
        alpha = _max(eps2, _step_value(param.norm(2)) / (param.numel() ** 0.5)) * rho_t
        if _nonzero(weight_decay):
            param.mul_(1 - lr * weight_decay)
        if grad.dim() > 1:
            # Factored second moment: the mean over each row and each column, their outer product normalised by
            # the mean of the rows.
            row_var, col_var = row_vars[i], col_vars[i]
            row_var.lerp_(_mean_square(grad, -1), one_minus_beta2_t)
            col_var.lerp_(_mean_square(grad, -2), one_minus_beta2_t)
            var_estimate = row_var @ col_var
            var_estimate.div_(ops.clamp_min(row_var.mean(dim=-2, keepdim=True), eps1))
        else:
            variance = variances[i]
            variance.lerp_(grad * grad, one_minus_beta2_t)
            var_estimate = variance.clone()
        update = ops.clamp_min(var_estimate, eps1 * eps1).rsqrt_()
        update.mul_(grad)
        denom = _max(1.0, _step_value(update.norm(2)) / ((update.numel() ** 0.5) * d))
        param.add_(update, alpha=-alpha / denom)


class Adafactor(Optimizer):
    """Adafactor, PyTorch's formulation (its `lr` bounds the relative step and scales decoupled weight decay).

    With t the step: beta2_t = 1 - t^beta2_decay, rho_t = min(lr, 1 / sqrt(t)), alpha_t = max(eps2, RMS(p)) * rho_t.
    A matrix (or a batch of them) keeps row and column means R, C of g^2 and V = R C / mean(R); a vector keeps V
    itself. U = g / max(sqrt(V), eps1), clipped to RMS(U) <= d, and p -= alpha_t * U (after p *= 1 - lr * wd).
    """

    _nonnegative = ("lr", "weight_decay")

    def __init__(self, params: ParamsT, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))

    def _check_options(self, options: dict[str, Any]) -> None:
        super()._check_options(options)
        if "beta2_decay" in options and not options["beta2_decay"] <= 0.0:
            raise self._invalid("beta2_decay value", options["beta2_decay"], "beta2_decay <= 0")
        eps = options.get("eps")
        if eps is not None:
            if eps[0] is not None and not eps[0] >= 0.0:
                raise self._invalid("epsilon1 value", eps[0], "epsilon1 >= 0 or None")
            if not eps[1] >= 0.0:
                raise self._invalid("epsilon2 value", eps[1], "epsilon2 >= 0")
        if "d" in options and not options["d"] >= 1.0:
            raise self._invalid("clipping threshold d", options["d"], "d >= 1")

    def _init_state(self, param: Tensor, group: dict[str, Any]) -> None:
        # The state depends on the gradient's rank (factors for a matrix, a full variance otherwise), so it is
        # made here rather than from `_state`, once, in PyTorch's order.
        state = self.state[param]
        if state:
            return
        grad = param.grad
        state["step"] = _step_counter(param)
        if grad.dim() > 1:
            state["row_var"] = grad.new_zeros((*grad.shape[:-1], 1))
            state["col_var"] = grad.new_zeros((*grad.shape[:-2], 1, grad.shape[-1]))
        else:
            state["variance"] = ops.zeros_like(grad)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        eps1, eps2 = hp["eps"]
        adafactor(params, [p.grad for p in params], [s.get("row_var") for s in states],
                  [s.get("col_var") for s in states], [s.get("variance") for s in states],
                  [s["step"] for s in states], d=hp["d"], lr=hp["lr"], beta2_decay=hp["beta2_decay"],
                  weight_decay=hp["weight_decay"], eps1=eps1, eps2=eps2, maximize=hp.get("maximize", False))
