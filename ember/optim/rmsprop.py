"""`RMSprop`: gradients scaled by a running root mean square, optionally centered and with momentum."""

from __future__ import annotations

from ember.optim.optimizer import Optimizer, ParamsT, _effective_grad, _nonzero, defaults_from


def rmsprop(params, grads, square_avgs, grad_avgs, momentum_buffers, state_steps, *, lr, alpha, eps, weight_decay,
            momentum, centered: bool, maximize: bool) -> None:
    """The RMSprop update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for i, p in enumerate(params):
        state_steps[i].add_(1)
        grad = _effective_grad(p, grads[i], weight_decay, maximize)
        square_avg = square_avgs[i]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if centered:
            grad_avg = grad_avgs[i]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg.add_(eps)
        if _nonzero(momentum):
            buf = momentum_buffers[i]
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)


class RMSprop(Optimizer):
    """RMSprop, PyTorch's formulation.

    v = alpha * v + (1 - alpha) * g^2; with `centered`, the running mean gbar of g is tracked and
    v - gbar^2 is used; the step is g / (sqrt(v) + eps), through a momentum buffer when momentum > 0.
    """

    _nonnegative = ("lr", "eps", "momentum", "weight_decay", "alpha")
    _state = ("step", "square_avg")
    # Made on first use, so turning momentum or centering on later (e.g. by OneCycleLR) works.
    _optional_state = {"momentum_buffer": "momentum", "grad_avg": "centered"}
    _functional = staticmethod(rmsprop)

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))
