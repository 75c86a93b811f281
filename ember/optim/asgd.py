"""`ASGD`: stochastic gradient descent with a decaying step and a running average of the iterates."""

from __future__ import annotations

import functools
from typing import Any

from ember import dispatch, ops
from ember.creation import tensor
from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, _step_counter, _step_value, defaults_from
from ember.tensor import Tensor


def _is_one(mu: Tensor) -> bool:
    return mu.item() == 1


def _averaging(mu: Tensor) -> bool:
    """Whether the average moves towards p (mu != 1) or is p itself: a guard of a compiled step (ember.jit),
    so the program is traced again when mu leaves 1 (after t0 steps)."""
    tracer = dispatch.current_tracer()
    if tracer is None:
        return not _is_one(mu)
    return not tracer.guard(functools.partial(_is_one, mu), key=("asgd_mu_is_one", id(mu)))


def asgd(params, grads, axs, mus, etas, state_steps, *, lambd, lr, t0, alpha, weight_decay, maximize: bool) -> None:
    """The ASGD update of each parameter, its average, eta and mu in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for p, grad, ax, mu, eta, step_t in zip(params, grads, axs, mus, etas, state_steps):
        step_t.add_(1)
        grad = _effective_grad(p, grad, weight_decay, maximize)
        eta_value = _step_value(eta)
        p.mul_(1 - lambd * eta_value)
        p.add_(grad, alpha=-eta_value)
        if _averaging(mu):
            ax.add_(p.sub(ax).mul_(mu))
        else:
            ax.copy_(p)
        step = _step_value(step_t)
        eta.copy_(as_tensor_like(lr / ((1 + lambd * lr * step) ** alpha), eta))
        mu.copy_(as_tensor_like(1 / _at_least_one(step - t0), mu))


def _at_least_one(x):
    return max(1, x) if not isinstance(x, Tensor) else ops.clamp_min(x, 1.0)


def as_tensor_like(value, like: Tensor) -> Tensor:
    """A Python number (eagerly) or a 0-d graph input (in a trace) as a tensor on like's device."""
    return value if isinstance(value, Tensor) else tensor(value, dtype=like.dtype, device=like.device)


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky), PyTorch's formulation.

    p = p * (1 - lambd * eta) - eta * g; the average ax follows p with weight mu; after each step
    eta = lr / (1 + lambd * lr * t)^alpha and mu = 1 / max(1, t - t0). eta and mu are 0-d state tensors.
    """

    _nonnegative = ("lr", "weight_decay")
    _state = ("step", "eta", "mu", "ax")
    _functional = staticmethod(asgd)

    def __init__(self, params: ParamsT, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))

    def _new_state(self, name: str, param: Tensor, group: dict[str, Any]) -> Tensor:
        if name == "eta":
            return _step_counter(param, group["lr"])
        if name == "mu":
            return _step_counter(param, 1.0)
        return super()._new_state(name, param, group)
