"""`split`, `chunk` and `unbind`: a tensor cut into pieces by one multi-output view op.

The pieces come from one node whose gradient rule joins the piece gradients once (a cat or a stack),
so splitting the n steps of a recurrence costs O(size) in the backward pass, not O(n * size) as one
slicing op per piece would. The op has a variable number of outputs, so there is one op instance per
piece count (the autograd engine reads `op.n_outputs`). The pieces are views that share the input's
version counter; as in PyTorch, writing into one in place while autograd records is an error (the
output of a function returning several views), and without autograd the write reaches the input.
"""

from __future__ import annotations

from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op
from ember.ops._rules import norm_dim, spec


class SplitOp(Op):
    """Pieces of x along `dim` with the given sizes; with squeeze, pieces of size 1 lose the dim."""

    name = "split"
    is_view = "multi"  # several outputs, each a view of input 0

    def __init__(self, n: int) -> None:
        self.n_outputs = n

    def infer(self, x, sizes, dim, squeeze):
        shape = tuple(x.shape)
        if sum(sizes) != shape[dim]:
            raise ShapeError(f"split: sections {list(sizes)} do not sum to dim {dim} of {fmt_shape(shape)}")
        pre, post = shape[:dim], shape[dim + 1:]
        specs = tuple(spec(pre + post if squeeze else pre + (s,) + post, x.dtype) for s in sizes)
        return specs[0] if len(specs) == 1 else specs  # one piece: an ordinary single-output op

    def kernel(self, xp, x, sizes, dim, squeeze):
        lead = (slice(None),) * dim
        if squeeze:
            out = [x[lead + (i, Ellipsis)] for i in range(len(sizes))]  # 0-d pieces stay views
        else:
            out, start = [], 0
            for s in sizes:
                out.append(x[lead + (slice(start, start + s),)])
                start += s
        return out[0] if len(out) == 1 else tuple(out)

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


def _op(n: int) -> SplitOp:
    op = _OPS.get(n)
    if op is None:
        op = _OPS[n] = SplitOp(n)
    return op


def split(tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into chunks of a given size, or into the listed section sizes (views)."""
    d = norm_dim("split", dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sizes = [s if isinstance(s, int) else int(s) for s in split_size_or_sections]
        if sum(sizes) != size:
            raise ShapeError(f"split: sections {sizes} sum to {sum(sizes)}, not to dimension {dim} of size {size}")
    pieces = apply(_op(len(sizes)), tensor, sizes=tuple(sizes), dim=d, squeeze=False)
    return pieces if isinstance(pieces, tuple) else (pieces,)


def chunk(input, chunks: int, dim: int = 0) -> tuple:
    """Split into `chunks` nearly equal pieces (the last may be smaller)."""
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    size = input.shape[norm_dim("chunk", dim, input.ndim)]
    step = max(1, -(-size // chunks))
    return split(input, step, dim)


def unbind(input, dim: int = 0) -> tuple:
    """The slices along `dim`, each without that dim (views)."""
    d = norm_dim("unbind", dim, input.ndim)
    pieces = apply(_op(input.shape[d]), input, sizes=(1,) * input.shape[d], dim=d, squeeze=True)
    return pieces if isinstance(pieces, tuple) else (pieces,)


def tensor_split(input, indices_or_sections, dim: int = 0):
    """Views of input split along `dim` into n parts of sizes differing by at most one (the first ones larger), or
    at the given indices (NumPy's array_split)."""
    from ember.ops.shape import narrow

    d = norm_dim("tensor_split", dim, input.ndim)
    size = input.shape[d]
    if hasattr(indices_or_sections, "shape"):
        if indices_or_sections.ndim == 0:
            indices_or_sections = int(indices_or_sections.item())
        else:
            indices_or_sections = [int(i) for i in indices_or_sections.tolist()]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise ValueError(f"tensor_split: the number of sections must be positive, got {n}")
        bounds = [i * (size // n) + min(i, size % n) for i in range(n + 1)]
    else:
        cuts = [min(max(i + size if i < 0 else i, 0), size) for i in indices_or_sections]
        bounds = [0] + cuts + [size]
    return tuple(narrow(input, d, lo, max(hi - lo, 0)) for lo, hi in zip(bounds, bounds[1:]))
