"""`Rprop`: resilient backpropagation, a per-coordinate step size grown or shrunk by the gradient's sign."""

from __future__ import annotations

from typing import Any

from ember import ops
from ember.optim.optimizer import Optimizer, ParamsT, defaults_from
from ember.tensor import Tensor


def rprop(params, grads, prevs, step_sizes, state_steps, *, step_size_min, step_size_max, etaminus, etaplus,
          maximize: bool) -> None:
    """The Rprop update of each parameter in place (PyTorch's functional form).

    The options may be Python numbers or 0-d tensors (graph inputs under ember.jit).
    """
    for i, p in enumerate(params):
        grad = -grads[i] if maximize else grads[i]
        prev, step_size = prevs[i], step_sizes[i]
        state_steps[i].add_(1)
        sign = grad.mul(prev).sign()
        # PyTorch's capturable form of its masked writes: the same factors, NaN kept where the sign is NaN.
        factor = ops.where(sign.gt(0), etaplus, sign)
        factor = ops.where(factor.lt(0), etaminus, factor)
        factor = ops.where(factor.eq(0), 1.0, factor)
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        # Where the sign flipped the step is skipped and the gradient forgotten, so the next step neither grows
        # nor shrinks the step size there.
        grad = ops.where(factor.eq(etaminus), 0.0, grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)


class Rprop(Optimizer):
    """Rprop (Riedmiller & Braun), PyTorch's formulation.

    Each coordinate has its own step size, starting at `lr`: multiplied by etaplus while the gradient keeps its
    sign, by etaminus when it flips (and that step is skipped), clamped to `step_sizes`; p -= step * sign(g).
    The learning rate is read only when a parameter's state is made, as in PyTorch.
    """

    _nonnegative = ("lr",)
    _state = ("step", "prev", "step_size")

    def __init__(self, params: ParamsT, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, defaults_from(locals()))

    def _check_options(self, options: dict[str, Any]) -> None:
        super()._check_options(options)
        etas = options.get("etas")
        if etas is not None and not 0.0 < etas[0] < 1.0 < etas[1]:
            raise self._invalid("eta values", f"{etas[0]}, {etas[1]}", "0 < etaminus < 1 < etaplus")

    def _new_state(self, name: str, param: Tensor, group: dict[str, Any]) -> Tensor:
        if name == "step_size":
            return ops.full_like(param, group["lr"])
        return super()._new_state(name, param, group)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        # The pairs `etas` and `step_sizes` are unpacked by hand: the state list `step_sizes` has the same name.
        states = [self.state[p] for p in params]
        etaminus, etaplus = hp["etas"]
        step_size_min, step_size_max = hp["step_sizes"]
        rprop(params, [p.grad for p in params], [s["prev"] for s in states], [s["step_size"] for s in states],
              [s["step"] for s in states], step_size_min=step_size_min, step_size_max=step_size_max,
              etaminus=etaminus, etaplus=etaplus, maximize=hp.get("maximize", False))
