"""`Adadelta`: steps scaled by the ratio of running RMS values of past updates and of gradients."""

from __future__ import annotations

from typing import Any

from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, defaults_from


def adadelta(params, grads, square_avgs, acc_deltas, state_steps, *, lr, rho, eps, weight_decay,
             maximize: bool) -> None:
    """The Adadelta update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for p, grad, square_avg, acc_delta, step_t in zip(params, grads, square_avgs, acc_deltas, state_steps):
        step_t.add_(1)
        grad = _effective_grad(p, grad, weight_decay, maximize)
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)


class Adadelta(Optimizer):
    """Adadelta (Zeiler), PyTorch's formulation.

    v = rho * v + (1 - rho) * g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g; u = rho * u + (1 - rho) * delta^2;
    p -= lr * delta.
    """

    _nonnegative = ("lr", "eps", "weight_decay")
    _state = ("step", "square_avg", "acc_delta")
    _functional = staticmethod(adadelta)

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))

    def _check_options(self, options: dict[str, Any]) -> None:
        super()._check_options(options)
        rho = options.get("rho")
        if rho is not None and not 0.0 <= rho <= 1.0:
            raise self._invalid("rho value", rho, "0 <= rho <= 1")
