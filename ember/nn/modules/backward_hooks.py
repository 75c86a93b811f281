"""A module's full backward hooks (PyTorch's `register_full_backward_hook` and `register_full_backward_pre_hook`).

A call of a module with such hooks runs its tensor inputs and its tensor outputs through two identity custom
functions (`ember.autograd.Function`), one at each boundary, as PyTorch's `BackwardHook` does: the output side's
backward sees the gradients of the outputs (the pre-hooks run there and may replace them); the input side's sees
the gradients of the inputs, and the full hooks run there with both, and may replace the inputs' gradients. Where
no input needs a gradient, the full hooks run on the output side with grad_input all None.
"""

from __future__ import annotations

import warnings

from ember.autograd.function import Function
from ember.tensor import Tensor


class _Boundary(Function):
    """Identity on the tensors; its backward hands their gradients to the call's record."""

    @staticmethod
    def forward(ctx, record, side, *tensors):
        ctx.set_materialize_grads(False)  # an unused output's gradient stays None, as the hooks see it in PyTorch
        ctx.record, ctx.side = record, side
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + ctx.record.backward(ctx.side, grads)


class _CallRecord:
    """One call of a module with full backward hooks: its hooks and the gradients of its outputs."""

    def __init__(self, module, n_inputs: int, inputs_need_grad: bool) -> None:
        self.module = module
        self.n_inputs = n_inputs
        self.inputs_need_grad = inputs_need_grad
        self.grad_outputs = None
        self.output_positions = (0, [])  # (top-level outputs, the positions of the tensors among them)

    def backward(self, side: str, grads: tuple) -> tuple:
        module = self.module
        if side == "output":
            n, at = self.output_positions
            full = [None] * n  # one per top-level output, None for those that are not tensors
            for k, g in zip(at, grads):
                full[k] = g
            full = tuple(full)
            for hook in list(module._backward_pre_hooks.values()):
                out = hook(module, full)
                if out is not None:
                    full = _checked(out, full, "backward pre-hook")
            self.grad_outputs = full
            if not self.inputs_need_grad:
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients.", stacklevel=2)
                self._run_full_hooks((None,) * self.n_inputs)
            return tuple(full[k] for k in at)
        return self._run_full_hooks(grads)

    def _run_full_hooks(self, grad_inputs: tuple) -> tuple:
        module = self.module
        for hook in list(module._backward_hooks.values()):
            out = hook(module, grad_inputs, self.grad_outputs)
            if out is not None:
                grad_inputs = _checked(out, grad_inputs, "backward hook")
        return grad_inputs


def _checked(new, old: tuple, what: str) -> tuple:
    new = tuple(new) if isinstance(new, (tuple, list)) else (new,)
    if len(new) != len(old):
        raise RuntimeError(f"{what} returned {len(new)} gradients, but the module has {len(old)} (one per tensor, or "
                           "None)")
    return new


def run_with_backward_hooks(module, args: tuple, call):
    """call(args) with the module's full backward hooks wrapped around it: its tensor positional inputs through the
    input boundary, its tensor outputs (a tensor or a tuple of them) through the output boundary."""
    from ember.autograd.grad_mode import is_grad_enabled

    positions = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[k] for k in positions]
    needs = is_grad_enabled() and any(t.requires_grad for t in tensors)
    record = _CallRecord(module, len(positions), needs)
    if needs:
        wrapped = _Boundary.apply(record, "input", *tensors)
        args = list(args)
        for k, t in zip(positions, wrapped):
            args[k] = t
        args = tuple(args)
    output = call(args)
    # the output's top-level tensors, as PyTorch's: an LSTM's (out, (h, c)) has grad_output (d out, None)
    outs = [output] if isinstance(output, Tensor) else list(output) if isinstance(output, tuple) else []
    at = [k for k, o in enumerate(outs) if isinstance(o, Tensor)]
    if not is_grad_enabled() or not any(outs[k].requires_grad for k in at):
        return output
    record.output_positions = (len(outs), at)
    for k, t in zip(at, _Boundary.apply(record, "output", *(outs[k] for k in at))):
        outs[k] = t
    if isinstance(output, Tensor):
        return outs[0]
    return type(output)(*outs) if hasattr(output, "_fields") else tuple(outs)  # a named tuple keeps its type
