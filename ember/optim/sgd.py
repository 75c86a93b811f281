"""`SGD`: stochastic gradient descent with optional momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from typing import Any

from ember import dispatch, ops
from ember.optim.fused import FusedUpdate
from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, _keyword_options, _nonzero, defaults_from
from ember.tensor import Tensor


def sgd(params, grads, momentum_buffers, *, lr, momentum, dampening, weight_decay, nesterov: bool,
        maximize: bool, fused: bool | None = None) -> None:
    """The SGD update of each parameter in place (PyTorch's functional form); fills new momentum buffers.

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit). `fused`: see
    optim/implementation.py (the compiled pass covers the steps with an existing momentum buffer).
    """
    values = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
    structure = dict(decay=_nonzero(weight_decay), nesterov=nesterov, maximize=maximize)
    has_momentum = _nonzero(momentum)
    update = FusedUpdate("SGD", "fused_sgd_momentum", sgd_update, fused if has_momentum else False, first=False,
                         **structure)
    for i, (p, grad) in enumerate(zip(params, grads)):
        if has_momentum and momentum_buffers[i] is None:
            # The first step makes the buffer with tensor ops, as PyTorch's fused SGD does.
            momentum_buffers[i] = ops.zeros_like(p)
            sgd_update(p, grad, momentum_buffers[i], **values, **structure, first=True)
        else:
            update(p, grad, momentum_buffers[i] if has_momentum else None, **values)


def sgd_update(param, grad, momentum_buffer, *, lr, momentum, dampening, weight_decay, decay: bool, nesterov: bool,
               maximize: bool, first: bool) -> None:
    """One parameter's SGD step in place, its momentum buffer (unless None) with it; `first`: the buffer is new.

    The rule of both the tensor-op update and the compiled pass generated from it (fused.py).
    """
    d_p = _effective_grad(param, grad, weight_decay, maximize, decay=decay)
    if momentum_buffer is not None:
        if first:  # the first buffer is the gradient itself, not scaled by (1 - dampening)
            momentum_buffer.copy_(d_p)
        else:
            momentum_buffer.mul_(momentum).add_(d_p, alpha=1 - dampening)
        d_p = d_p.add(momentum_buffer, alpha=momentum) if nesterov else momentum_buffer
    param.add_(d_p, alpha=-lr)


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's formulation.

    With momentum `mu` and dampening `tau`: b_1 = g_1, b_t = mu * b_{t-1} + (1 - tau) * g_t;
    the step uses b_t (or g_t + mu * b_t with `nesterov`), and p -= lr * step.
    """

    _fused_kernel = True
    _nonnegative = ("lr", "momentum", "weight_decay")

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, defaults_from(locals()))

    def _check_options(self, options: dict[str, Any]) -> None:
        super()._check_options(options)
        if options.get("nesterov") and (options.get("momentum", 0) <= 0 or options.get("dampening", 0) != 0):
            raise ValueError(f"{type(self).__name__}: Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        # The momentum buffers are made by the first step that uses them, as PyTorch's: sgd() fills the list.
        buffers = [self.state[p].get("momentum_buffer") for p in params]
        sgd(params, [p.grad for p in params], buffers, **_keyword_options(sgd, hp))
        if _nonzero(hp["momentum"]):
            tracer = dispatch.current_tracer()
            for p, buf in zip(params, buffers):
                # Under ember.jit a first buffer (a copy of the gradient) is made in the trace: it is kept
                # in a concrete tensor, and the next call retraces with the buffers in place.
                self.state[p]["momentum_buffer"] = buf if tracer is None else tracer.keep(buf)
