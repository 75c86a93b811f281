"""`SGD`: stochastic gradient descent with optional momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ember.ops import dispatch
from ember.optim import implementation
from ember.optim.fused import eager, sgd_momentum_pass, unfused_reason
from ember.optim.optimizer import Optimizer, _effective_grad, _nonzero
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
        foreach: bool | None = None,
        fused: bool | None = None,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        defaults.update(implementation.options(
            foreach=foreach, fused=fused, differentiable=differentiable, has_fused=True))
        super().__init__(params, defaults)

    _fused_kernel = True

    def _check_options(self, options: dict[str, Any]) -> None:
        self._require_nonneg(options, "lr", "momentum", "weight_decay")
        if options.get("nesterov") and (options.get("momentum", 0) <= 0 or options.get("dampening", 0) != 0):
            raise ValueError(f"{type(self).__name__}: Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        grads = [p.grad for p in params]
        buffers = [self.state[p].get("momentum_buffer") for p in params]
        sgd(params, grads, buffers, lr=hp["lr"], momentum=hp["momentum"], dampening=hp["dampening"],
            weight_decay=hp["weight_decay"], nesterov=group["nesterov"], maximize=group["maximize"],
            fused=group.get("fused"))
        if _nonzero(hp["momentum"]):
            tracer = dispatch.current_tracer()
            for p, buf in zip(params, buffers):
                # Under ember.jit a first buffer (a copy of the gradient) is made in the trace: it is kept
                # in a concrete tensor, and the next call retraces with the buffers in place.
                self.state[p]["momentum_buffer"] = buf if tracer is None else tracer.keep(buf)


def sgd(params, grads, momentum_buffers, *, lr, momentum, dampening, weight_decay, nesterov: bool,
        maximize: bool, fused: bool | None = None) -> None:
    """The SGD update of each parameter in place (PyTorch's functional form); fills new momentum buffers.

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit). `fused`: see
    optim/implementation.py (the compiled pass covers updates with an existing momentum buffer).
    """
    try_compiled = fused is not False and _nonzero(momentum)
    compiled = sgd_momentum_pass(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                 nesterov=nesterov, maximize=maximize) if try_compiled else None
    for i, (p, grad) in enumerate(zip(params, grads)):
        if try_compiled and momentum_buffers[i] is not None:
            if compiled is not None and compiled(p, grad, momentum_buffers[i]):
                continue  # one compiled pass (fused.py), bit for bit the ops below
            if fused and eager():
                raise implementation.fused_failed("SGD", unfused_reason(
                    (p, grad, momentum_buffers[i]), (lr, momentum, dampening, weight_decay)))
        d_p = _effective_grad(p, grad, weight_decay, maximize)
        if _nonzero(momentum):
            buf = momentum_buffers[i]
            if buf is None:
                # The first buffer is the gradient itself, not scaled by (1 - dampening).
                buf = momentum_buffers[i] = d_p.detach().clone()
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
