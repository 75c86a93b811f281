"""Collectives as ops (the op contract): graph nodes inside ember.jit and ember.v1, and differentiable.

`all_reduce_op` and `broadcast_op` are `stateful`: graph passes never merge, drop or reorder them, and
the dependency engine keeps stateful steps in program order, so every rank starts its collectives in
the same order. Their gradient rules are collectives too (the gradient of a sum over ranks is the
sum of the ranks' gradients), so SyncBatchNorm written with them is differentiable.
"""

from __future__ import annotations

import numpy as np

from ember.backends.meta import MetaArray
from ember.dispatch import apply
from ember.distributed import checks
from ember.distributed.reduce_op import ReduceOp
from ember.distributed.work import wait_requests
from ember.op import Op, register


def _on_host(xp, x):
    return np.array(x, copy=True, order="C") if xp is np else xp.asnumpy(x)


def _back(xp, host):
    return host if xp is np else xp.asarray(host)


class AllReduceOp(Op):
    """The reduction over the group's ranks of each rank's input (a new array; the input is not written)."""

    name = "dist_all_reduce"
    stateful = True

    def infer(self, x, group, reduce):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, group, reduce):
        out = _on_host(xp, x)
        t = group.transport
        seq = group.enter()
        checks.check(group, "all_reduce", seq, out.dtype, out.shape, op=reduce)
        wait_requests(t, t.iallreduce(out, reduce), "all_reduce", group.members, (group, seq))
        if reduce is ReduceOp.AVG:
            np.divide(out, group.size(), out=out, casting="unsafe")
        return _back(xp, out)

    def vjp(self, ctx, g):
        reduce = ctx.attrs["reduce"]
        if reduce not in (ReduceOp.SUM, ReduceOp.AVG):
            raise RuntimeError(f"the derivative of all_reduce with {reduce!r} is not implemented (SUM and AVG are)")
        return (apply(all_reduce_op, g, group=ctx.attrs["group"], reduce=reduce),)


all_reduce_op = register(AllReduceOp())


class BroadcastOp(Op):
    """Rank `src`'s input (a group rank) on every rank of the group."""

    name = "dist_broadcast"
    stateful = True

    def infer(self, x, group, src):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, group, src):
        out = _on_host(xp, x)
        t = group.transport
        seq = group.enter()
        checks.check(group, "broadcast", seq, out.dtype, out.shape, root=src)
        wait_requests(t, t.ibcast(out, src), "broadcast", group.members, (group, seq))
        return _back(xp, out)

    def vjp(self, ctx, g):
        group, src = ctx.attrs["group"], ctx.attrs["src"]
        total = apply(all_reduce_op, g, group=group, reduce=ReduceOp.SUM)  # every rank's use of src's value
        return (total if group.rank() == src else total * 0,)


broadcast_op = register(BroadcastOp())


def graph_all_reduce(tensor, op: ReduceOp, group) -> None:
    """In-place all_reduce on a graph tensor: a node whose result is written back into `tensor`."""
    from ember.autograd.grad_mode import no_grad

    result = apply(all_reduce_op, tensor, group=group, reduce=op)
    with no_grad():
        tensor.copy_(result)


def graph_broadcast(tensor, src: int, group) -> None:
    """In-place broadcast on a graph tensor (src is a group rank)."""
    from ember.autograd.grad_mode import no_grad

    result = apply(broadcast_op, tensor, group=group, src=src)
    with no_grad():
        tensor.copy_(result)


# --- a bucket's allreduce split in two, so the graph engine can run other steps in between ---------------
_PENDING: dict = {}  # id(buffer) -> (the requests reducing it, collective number) (started by all_reduce_start_op, awaited by all_reduce_wait_op)


class AllReduceStartOp(Op):
    """Start summing a copy of the input over the group (nonblocking); the output is that copy, which MPI fills.

    Its result must only be read by `all_reduce_wait_op`. Being stateful, starts run in program order on every
    rank, while the steps between a start and its wait (the rest of the backward pass) run meanwhile.
    """

    name = "dist_all_reduce_start"
    stateful = True
    differentiable = False

    def infer(self, x, group):
        return MetaArray(x.shape, x.dtype)

    def kernel(self, xp, x, group):
        buf = _on_host(xp, x)
        seq = group.enter()
        checks.check(group, "DistributedDataParallel", seq, buf.dtype, buf.shape, detail_only=True)
        _PENDING[id(buf)] = (group.transport.iallreduce(buf, ReduceOp.SUM), seq)
        return buf

    def vjp(self, ctx, g):
        raise RuntimeError("dist_all_reduce_start has no derivative (it reduces gradients)")


all_reduce_start_op = register(AllReduceStartOp())


class AllReduceWaitOp(Op):
    """Wait for the reduction an `all_reduce_start_op` began; the sum divided by `divisor` (the average for DDP)."""

    name = "dist_all_reduce_wait"
    differentiable = False

    def infer(self, buf, group, divisor):
        return MetaArray(buf.shape, buf.dtype)

    def kernel(self, xp, buf, group, divisor):
        pending = _PENDING.pop(id(buf), None)
        if pending is None:
            raise RuntimeError("dist_all_reduce_wait: its buffer was not made by dist_all_reduce_start in this run")
        reqs, seq = pending
        wait_requests(group.transport, reqs, "all_reduce (DistributedDataParallel)", group.members, (group, seq))
        if divisor != 1:
            np.divide(buf, divisor, out=buf, casting="unsafe")
        return _back(xp, buf)



all_reduce_wait_op = register(AllReduceWaitOp())
