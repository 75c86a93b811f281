"""Send and Recv: a value crossing from one device to another inside a graph.

Placement puts a pair at every device boundary: `send` on the source device hands its input over
unchanged, `recv` on the destination copies it there. When a placed graph runs, each device runs
its own part and the pair meets through a rendezvous keyed by `key` (see ember.graph.placement).
"""

from __future__ import annotations

import itertools

import numpy as np

from ember.autograd.engine import record
from ember.autograd.grad_mode import state as grad_state
from ember.backends.meta import MetaArray
from ember.op import Op, register

_keys = itertools.count()


def new_key(src, dst) -> str:
    """A rendezvous key naming one send/recv pair (unique in this process)."""
    return f"{src}->{dst}#{next(_keys)}"


def copy_array(array, src, dst):
    """An array of device `src` copied onto device `dst` through the host."""
    host = src.backend.to_host(array)
    if src.type == "cpu" and dst.type == "cpu":
        host = np.array(host, copy=True)  # logical CPU devices never share storage
    return dst.backend.from_host(host)


class SendOp(Op):
    """The start of a transfer, on the source device: its input, unchanged (no copy)."""

    name = "send"
    placed = True  # the graph builder never moves a transfer's own input

    def infer(self, x, key, dst):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, key, dst):
        return x

    def vjp(self, ctx, g):
        return (g,)


send_op = register(SendOp())


class RecvOp(Op):
    """The end of a transfer, on the destination device: a copy of what the matching send sent."""

    name = "recv"
    placed = True

    def infer(self, x, key, src):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, key, src):
        # Run as one kernel (constant folding, a single plan): copy from src into this device's xp.
        host = src.backend.to_host(x)
        return np.array(host, copy=True) if xp is np else xp.asarray(host)

    def vjp(self, ctx, g):
        return (transfer(g, ctx.attrs["src"]),)  # the gradient goes back the way the value came


recv_op = register(RecvOp())


def transfer(x, dst):
    """`x` on device `dst` through a send node on x's device and a recv node on dst (differentiable)."""
    from ember.dispatch import apply, current, is_symbolic
    from ember.tensor import Tensor

    src = x._device
    if dst is src:
        return x
    key = new_key(src, dst)
    sent = apply(send_op, x, key=key, dst=dst)
    data = sent._data
    attrs = {"key": key, "src": src}
    if is_symbolic(data):
        out = Tensor._make(data.graph.add_op(recv_op, [data], attrs, dst), dst)
        current().outputs((out,))
    else:  # outside a graph a transfer is just a copy
        out = Tensor._make(copy_array(data, src, dst), dst)
    if sent._requires_grad and grad_state.enabled:
        record(recv_op, attrs, (sent,), (out,))
    return out
