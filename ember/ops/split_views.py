"""Split a tensor into pieces with one multi-output op, so the backward is a single cat or stack.

`split`/`unbind` in shape.py make one getitem per piece, and each getitem's gradient is a zero
tensor of the whole input's size with the piece added in; for the n time steps of a recurrence that
is O(n * size) work in the backward pass. Here the n pieces come from one node whose gradient rule
joins the n piece gradients once. The op has a variable number of outputs, so there is one op
instance per piece count (the autograd engine reads `op.n_outputs`). The pieces share the input's
version counter, so a later in-place write to the input is caught by the saved-tensor checks; they
are meant to be read, not written in place.
"""

from __future__ import annotations

from ember.errors import ShapeError, fmt_shape
from ember.ops._rules import spec
from ember.ops.dispatch import apply
from ember.ops.registry import Op
from ember.tensor import Tensor


class _SplitViews(Op):
    """Pieces of x along `dim` with the given sizes (views); with squeeze, pieces of size 1 lose the dim."""

    name = "split_views"

    def __init__(self, n: int) -> None:
        self.n_outputs = n

    def infer(self, x, sizes, dim, squeeze):
        shape = tuple(x.shape)
        if sum(sizes) != shape[dim]:
            raise ShapeError(f"split_views: sections {list(sizes)} do not sum to dim {dim} of {fmt_shape(shape)}")
        pre, post = shape[:dim], shape[dim + 1:]
        return tuple(spec(pre + post if squeeze else pre + (s,) + post, x.dtype) for s in sizes)

    def kernel(self, xp, x, sizes, dim, squeeze):
        lead = (slice(None),) * dim
        if squeeze:
            return tuple(x[lead + (i,)] for i in range(len(sizes)))
        out, start = [], 0
        for s in sizes:
            out.append(x[lead + (slice(start, start + s),)])
            start += s
        return tuple(out)

    def vjp(self, ctx, *grads):
        from ember.ops.creation_ops import zeros_like_shape
        from ember.ops.shape import cat, stack

        sizes, dim, squeeze = ctx.attrs["sizes"], ctx.attrs["dim"], ctx.attrs["squeeze"]
        ref = next(g for g in grads if g is not None)
        shape = ctx.in_shape(0)
        pieces = []
        for g, s in zip(grads, sizes):
            if g is None:
                piece_shape = shape[:dim] + ((s,) if not squeeze else ()) + shape[dim + 1:]
                g = zeros_like_shape(ref, piece_shape)
            pieces.append(g)
        return (stack(pieces, dim) if squeeze else cat(pieces, dim)),


_OPS: dict = {}


def _op(n: int) -> _SplitViews:
    op = _OPS.get(n)
    if op is None:
        op = _OPS[n] = _SplitViews(n)
    return op


def _norm_dim(dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"split_views: dim {dim} is out of range for a {ndim}-D tensor")
    return dim % ndim


def _apply(input: Tensor, sizes: tuple, dim: int, squeeze: bool) -> tuple:
    pieces = apply(_op(len(sizes)), input, sizes=sizes, dim=dim, squeeze=squeeze)
    for p in pieces:
        p._version = input._version
    return pieces


def split_views(input: Tensor, sizes, dim: int = 0) -> tuple:
    """input split along dim into pieces of the given sizes (a list) or of one size (an int)."""
    d = _norm_dim(dim, input.ndim)
    if isinstance(sizes, int):
        total = input.shape[d]
        sizes = [min(sizes, total - s) for s in range(0, total, sizes)]
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) == 1:
        return (input,)
    return _apply(input, sizes, d, False)


def unbind_views(input: Tensor, dim: int = 0) -> tuple:
    """The slices of input along dim, each without that dim (one op; backward is one stack)."""
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d]
    if n == 1:
        from ember.ops.shape import squeeze

        return (squeeze(input, d),)
    return _apply(input, (1,) * n, d, True)
