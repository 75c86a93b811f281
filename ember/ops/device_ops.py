"""`to_device`: a differentiable copy of a tensor on another device."""

from __future__ import annotations

import numpy as np

from ember.autograd.engine import record
from ember.autograd.grad_mode import state as grad_state
from ember.backends.meta import MetaArray
from ember.dispatch import current, is_symbolic
from ember.errors import DataDependentError
from ember.op import Op, register


class ToDeviceOp(Op):
    name = "to_device"

    def infer(self, x, device):
        return MetaArray(x.shape, x.dtype)

    def vjp(self, ctx, g):
        return (to_device(g, ctx.attrs["source"]),)


_to_device_op = register(ToDeviceOp())


def to_device(x, device):
    """A copy of x on `device` (differentiable; the gradient flows back to x's device)."""
    from ember.tensor import Tensor

    src = x._device
    if device is src:
        return x
    if device.type != "meta" and src.type != "meta" and (is_symbolic(x) or current().symbolic):
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
        record(_to_device_op, {"device": device, "source": src}, (x,), (out,))
    return out


