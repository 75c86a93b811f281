"""`ReduceOp`: how all_reduce, reduce and reduce_scatter combine the ranks' values (PyTorch's names)."""

from __future__ import annotations

import enum


class ReduceOp(enum.Enum):
    """SUM, AVG, PRODUCT, MIN, MAX, and the bitwise BAND, BOR, BXOR (integers and bool)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


def as_reduce_op(op, what: str) -> ReduceOp:
    """`op` as a ReduceOp (a ReduceOp, or its name such as "sum"); a ValueError naming `what` otherwise."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        try:
            return ReduceOp(op.lower())
        except ValueError:
            pass
    names = ", ".join(o.name for o in ReduceOp)
    raise ValueError(f"{what}: op must be a ReduceOp ({names}), got {op!r}")
