"""Run-time checks TF1 kernels make: out-of-range indices and labels raise InvalidArgumentError when the graph runs.

Ember's own index ops follow NumPy/PyTorch on bad indices (negative ones count from the end); in
a TF1 graph an index outside [0, n) is an error, so the TF functions pass their indices through
`check_indices` first.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import spec
from ember.tensor import Tensor
from ember.v1.errors import FailedPreconditionError, InvalidArgumentError


class CheckIndicesOp(Op):
    """The indices unchanged, or InvalidArgumentError naming the first one outside [0, n), n being the size
    of `ref`'s dimension `axis` when the graph runs."""

    name = "check_indices"
    differentiable = False

    def infer(self, idx, ref, axis, what):
        return spec(idx.shape, idx.dtype)

    def kernel(self, xp, idx, ref, axis, what):
        limit = ref.shape[axis]
        bad = (idx < 0) | (idx >= limit)
        if bool(bad.any()):
            flat = np.asarray(idx).reshape(-1)
            pos = int(np.flatnonzero(np.asarray(bad).reshape(-1))[0])
            raise InvalidArgumentError(what.format(index=pos, value=int(flat[pos]), limit=limit,
                                                   values=" ".join(str(int(v)) for v in flat[:20])))
        return idx


check_indices_op = register(CheckIndicesOp())


class AssertEmptyOp(Op):
    """Its input (a 1-D array) unchanged, or FailedPreconditionError listing its items when it is not empty."""

    name = "assert_empty"
    differentiable = False
    stateful = True  # its point is the check: never prune or fold it away

    def infer(self, x, what):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, what):
        if len(x):
            items = ", ".join(v.decode() if isinstance(v, bytes) else str(v) for v in x)
            raise FailedPreconditionError(f"{what}: {items}")
        return x


assert_empty_op = register(AssertEmptyOp())


def check_indices(idx: Tensor, ref: Tensor, axis: int, what: str) -> Tensor:
    """`idx` checked, when the graph runs, to lie in [0, ref.shape[axis]); `what` is the message, with {index},
    {value}, {limit} and {values} filled in."""
    return apply(check_indices_op, idx, ref, axis=int(axis), what=what)


def assert_empty(x: Tensor, what: str) -> Tensor:
    """`x` checked to be empty when the graph runs (FailedPreconditionError otherwise)."""
    return apply(assert_empty_op, x, what=what)
