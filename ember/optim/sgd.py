"""`SGD`: stochastic gradient descent with optional momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ember.grad_mode import no_grad
from ember.optim.optimizer import Optimizer, _effective_grad
from ember.tensor import Tensor


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's formulation.

    With momentum `mu` and dampening `tau`: b_1 = g_1, b_t = mu * b_{t-1} + (1 - tau) * g_t;
    the step uses b_t (or g_t + mu * b_t with `nesterov`), and p -= lr * step.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "momentum", "weight_decay")
        if options.get("nesterov") and (options.get("momentum", 0) <= 0 or options.get("dampening", 0) != 0):
            raise ValueError(f"{type(self).__name__}: Nesterov momentum requires a momentum and zero dampening")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one SGD step; returns the closure's loss if a closure is given."""
        loss = self._eval_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr = float(group["lr"])
                momentum = group["momentum"]
                dampening = group["dampening"]
                weight_decay = group["weight_decay"]
                nesterov = group["nesterov"]
                maximize = group["maximize"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    d_p = _effective_grad(p, grad, weight_decay, maximize)
                    if momentum != 0:
                        state = self.state[p]
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            # The first buffer is the gradient itself, not scaled by (1 - dampening).
                            buf = state["momentum_buffer"] = d_p.detach().clone()
                        else:
                            buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                        if nesterov:
                            if d_p is grad:
                                d_p = buf.mul(momentum).add_(grad)
                            else:
                                d_p.add_(buf, alpha=momentum)
                        else:
                            d_p = buf
                    p.add_(d_p, alpha=-lr)
        return loss
