"""Collectives that return new tensors and have gradients: all_reduce and broadcast."""

from __future__ import annotations

from ember.dispatch import apply
from ember.distributed.group import resolve
from ember.distributed.ops import all_reduce_op, broadcast_op
from ember.distributed.reduce_op import ReduceOp, as_reduce_op


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction of `tensor` over the ranks, as a new tensor; its gradient is the all_reduce of the gradients."""
    pg = resolve(group, "all_reduce")
    return apply(all_reduce_op, tensor, group=pg, reduce=as_reduce_op(op, "all_reduce"))


def broadcast(tensor, src: int, group=None):
    """Rank `src`'s `tensor` on every rank, as a new tensor; gradients flow back to rank `src`."""
    pg = resolve(group, "broadcast")
    return apply(broadcast_op, tensor, group=pg, src=pg.group_rank(src, "broadcast", "src"))
