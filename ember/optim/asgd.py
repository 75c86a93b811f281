"""`ASGD`: stochastic gradient descent with a decaying step and a running average of the iterates."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from ember import ops
from ember.creation import tensor
from ember.ops import dispatch
from ember.optim import implementation
from ember.optim.optimizer import Optimizer, _effective_grad, _step_counter, _step_value
from ember.tensor import Tensor


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky), PyTorch's formulation.

    p = p * (1 - lambd * eta) - eta * g; the average ax follows p with weight mu; after each step
    eta = lr / (1 + lambd * lr * t)^alpha and mu = 1 / max(1, t - t0). eta and mu are 0-d state tensors.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, capturable=capturable, differentiable=differentiable, has_capturable=True))
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "weight_decay")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            if p.grad is not None and not self.state[p]:
                state = self.state[p]
                state["step"] = _step_counter(p)
                state["eta"] = tensor(float(group["lr"]), dtype=state["step"].dtype, device=p.device)
                state["mu"] = _step_counter(p).add_(1)
                state["ax"] = ops.zeros_like(p)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        asgd(params, [p.grad for p in params], [s["ax"] for s in states], [s["mu"] for s in states],
             [s["eta"] for s in states], [s["step"] for s in states], lambd=hp["lambd"], lr=hp["lr"], t0=hp["t0"],
             alpha=hp["alpha"], weight_decay=hp["weight_decay"], maximize=group["maximize"])


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
