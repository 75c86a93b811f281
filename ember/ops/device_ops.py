"""Ops that cross devices or rewrite autograd history: to_device and in-place writes through views."""

from __future__ import annotations

import numpy as np

from ember.autograd import Node
from ember.backends.meta import MetaArray
from ember.errors import DataDependentError
from ember.grad_mode import state as grad_state
from ember.ops.registry import Op, defop


@defop
class _ToDevice(Op):
    name = "to_device"

    def infer(self, x, device):
        return MetaArray(x.shape, x.dtype)

    def vjp(self, ctx, g):
        return (to_device(g, ctx.attrs["source"]),)


def to_device(x, device):
    """A copy of x on `device` (differentiable; the gradient flows back to x's device)."""
    from ember.tensor import Tensor

    src = x._device
    if device is src:
        return x
    if device.type != "meta" and src.type != "meta" and (getattr(x._data, "symbolic", False) or _tracing()):
        from ember.ops.transfer_ops import transfer

        return transfer(x, device)  # inside a graph a move is a send/recv pair, read at every run
    if isinstance(x._data, MetaArray):
        if device.type != "meta":
            raise DataDependentError(f"to: cannot copy a meta tensor to {device}: it has no data")
        data = x._data
    elif device.type == "meta":
        data = MetaArray(x._data.shape, x._data.dtype)
    else:
        host = src.backend.to_host(x._data)
        if src.type == "cpu" and device.type == "cpu":
            host = np.array(host, copy=True)  # logical CPU devices never share storage
        data = device.backend.from_host(host)
    out = Tensor._make(data, device)
    if x._requires_grad and grad_state.enabled:
        out._grad_fn = Node(_ToDevice, {"device": device, "source": src}, (x,), (out,))
        out._requires_grad = True
    return out


def _tracing() -> bool:
    from ember.ops.dispatch import trace_state

    return trace_state.hook is not None


@defop
class _CopySlices(Op):
    """History of a base tensor after an in-place write through one of its views."""

    name = "copy_slices"

    def infer(self, base, view_value, chain):
        return MetaArray(base.shape, base.dtype)

    def vjp(self, ctx, g):
        from ember.ops.shape import clone

        chain = ctx.attrs["chain"]
        g_base = clone(g)
        region = replay_view(g_base, chain)
        g_view = replay_view(g, chain) if ctx.needs_grad(1) else None
        region.zero_() if not region._requires_grad else region.mul_(0.0)
        return g_base, g_view


def view_chain(t):
    """The (op, attrs, extra inputs) steps that make view `t` from its base, outermost last."""
    steps = []
    fn = t._view_fn
    while fn is not None:
        op, attrs, extra, parent = fn
        steps.append((op, attrs, extra))
        fn = parent
    return tuple(reversed(steps))


def replay_view(base, chain):
    """Apply recorded view steps to another tensor of the base's shape."""
    from ember.ops.dispatch import apply

    out = base
    for op, attrs, extra in chain:
        out = apply(op, out, *extra, **attrs)
    return out


def rebase_view_history(view, result) -> None:
    """After writing `result` into `view` in place, make the base's history include the write."""
    base = view._base
    if base._grad_fn is None and base._requires_grad:
        raise RuntimeError(
            "a view of a leaf tensor that requires grad is being used in an in-place operation; "
            "clone the leaf first or wrap the write in `with ember.no_grad():`"
        )
    node = Node(_CopySlices, {"chain": view_chain(view)}, (base, result), (base,))
    base._grad_fn = node
    base._output_nr = 0
    base._requires_grad = True
