"""Shape functions composed of other ops (their gradients come from those ops): diagonal matrices, block and
Kronecker products, grids and index lists, rotations, repeats and differences, with PyTorch's names and rules."""

from __future__ import annotations

import numpy as np

from ember import creation
from ember import dtypes as dt
from ember.errors import ShapeError, fmt_shape
from ember.ops._rules import norm_dim, result_dtype
from ember.ops.elementwise import logical_xor, where
from ember.ops.indexing import index_select
from ember.ops.shape import (
    cat,
    expand,
    flip,
    movedim,
    narrow,
    pad,
    reshape,
    stack,
    transpose,
    unsqueeze,
)
from ember.ops.shape import diagonal as _diagonal  # (diag's parameter is named diagonal, as in PyTorch)


def _eye_mask(like, n: int):
    """An (n, n) bool identity on like's device."""
    return creation.tensor(np.eye(n, dtype=bool), device=like.device)


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Matrices whose `offset` diagonal (over dims dim1, dim2 of the result) holds input's last dim; zero elsewhere
    (an inf on the diagonal leaves zeros beside it, not NaN)."""
    n = input.shape[-1] if input.ndim else 1
    x = input if input.ndim else reshape(input, (1,))
    lead = tuple(x.shape[:-1])
    square = where(_eye_mask(x, n), expand(unsqueeze(x, -1), lead + (n, n)), 0)
    k = abs(int(offset))
    if k:  # offset > 0: k columns before and k rows after move the diagonal k up; offset < 0: k down
        square = pad(square, (k, 0, 0, k) if offset > 0 else (0, k, k, 0))
    nd = square.ndim
    d1, d2 = norm_dim("diag_embed", dim1, nd), norm_dim("diag_embed", dim2, nd)
    if d1 == d2:
        raise ValueError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    return movedim(square, (nd - 2, nd - 1), (d1, d2))


def diag(input, diagonal: int = 0):
    """A 1-D input's square matrix with it on the `diagonal`-th diagonal, or a 2-D input's diagonal (a copy)."""
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return _diagonal(input, diagonal).clone()
    raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got shape {fmt_shape(input.shape)}")



def diagflat(input, offset: int = 0):
    """The flattened input on the `offset`-th diagonal of a square matrix."""
    return diag_embed(reshape(input, (-1,)), offset)


def block_diag(*tensors):
    """The tensors (0-D, 1-D as one row, or 2-D) along the diagonal of one matrix, zero elsewhere."""
    if not tensors:
        return creation.zeros(0, 0)
    dtype = dt.from_numpy_dtype(result_dtype(*[t._data for t in tensors]))
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(f"block_diag: tensor {i} must have 2 or fewer dimensions, got shape {fmt_shape(t.shape)}")
        blocks.append(reshape(t, (1, -1) if t.ndim == 1 else (1, 1) if t.ndim == 0 else tuple(t.shape)).to(dtype))
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(pad(b, (left, width - left - b.shape[1])))
        left += b.shape[1]
    return cat(rows, 0)


def kron(input, other):
    """The Kronecker product: result[i*m + k, ...] = input[i, ...] * other[k, ...], dim by dim."""
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = reshape(input, tuple(d for s in sa for d in (s, 1)))
    b = reshape(other, tuple(d for s in sb for d in (1, s)))
    return reshape(a * b, tuple(x * y for x, y in zip(sa, sb)))


def _index_pairs(pairs, dtype, device):
    return creation.tensor(np.stack(pairs).astype(dt.as_dtype(dtype or dt.int64).np), device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None):
    """The (2, N) row and column indices of a row x col matrix's lower triangle (below the `offset` diagonal)."""
    return _index_pairs(np.tril_indices(row, offset, col), dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None):
    """The (2, N) row and column indices of a row x col matrix's upper triangle (from the `offset` diagonal)."""
    return _index_pairs(np.triu_indices(row, offset, col), dtype, device)


def meshgrid(*tensors, indexing: str = "ij"):
    """Coordinate grids of 0-D or 1-D tensors: 'ij' indexes by the tensors' order, 'xy' swaps the first two."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: expected 0-D or 1-D tensors, got shape {fmt_shape(t.shape)}")
        if t.dtype is not tensors[0].dtype:
            raise TypeError(f"meshgrid: expected tensors of one dtype, got {tensors[0].dtype.name} and {t.dtype.name}")
    vecs = [reshape(t, (-1,)) for t in tensors]
    swap = indexing == "xy" and len(vecs) > 1
    if swap:
        vecs[0], vecs[1] = vecs[1], vecs[0]
    shape = tuple(v.shape[0] for v in vecs)
    grids = []
    for i, v in enumerate(vecs):
        view = [1] * len(vecs)
        view[i] = shape[i]
        grids.append(expand(reshape(v, tuple(view)), shape))
    if swap:  # the grids over (second, first, ...), returned in the tensors' order
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors):
    """Every combination of the 1-D tensors' elements, one per row (a single tensor comes back as itself)."""
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(g, (-1,)) for g in meshgrid(*tensors, indexing="ij")], 1)


def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotated by 90 degrees k times, from the first of `dims` towards the second."""
    dims = tuple(dims)
    if len(dims) != 2 or input.ndim < 2:
        raise ShapeError(f"rot90: expected two dims of a tensor of 2 or more dimensions, got dims {dims} for shape "
                         f"{fmt_shape(input.shape)}")
    a, b = (norm_dim("rot90", d, input.ndim) for d in dims)
    if a == b:
        raise ValueError(f"rot90: the two dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (b,)), a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return transpose(flip(input, (a,)), a, b)
    return input.clone()


def _at_least(n: int, tensors):
    shapes = {1: lambda s: (1,), 2: lambda s: (1,) + s, 3: lambda s: (1,) + s + (1,) if len(s) == 1 else s + (1,)}
    out = []
    for t in tensors:
        s = tuple(t.shape)
        if t.ndim >= n:
            out.append(t)
        elif t.ndim == 0:
            out.append(reshape(t, (1,) * n))
        else:
            out.append(reshape(t, shapes[n](s)))
    return out


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a 0-D one becomes (1,)); one tensor in, one out."""
    out = _at_least(1, tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors)
    return out[0] if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions ((n,) becomes (1, n))."""
    out = _at_least(2, tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors)
    return out[0] if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions ((n,) becomes (1, n, 1), (m, n) becomes (m, n, 1))."""
    out = _at_least(3, tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors)
    return out[0] if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def repeat_interleave(input, repeats=None, dim: int | None = None, *, output_size: int | None = None):
    """Each element repeated `repeats` times (an int, or a count per element along `dim`) in place, the input
    flattened when dim is None; repeat_interleave(counts) alone gives each position counts[i] times."""
    if repeats is None:  # torch.repeat_interleave(repeats): the indices 0, 1, ... repeated
        counts = input
        positions = creation.arange(counts.shape[0], device=counts.device)
        return repeat_interleave(positions, counts, 0)
    if dim is None:
        input, dim = reshape(input, (-1,)), 0
    d = norm_dim("repeat_interleave", dim, input.ndim)
    size = input.shape[d]
    if hasattr(repeats, "shape"):
        if repeats.dtype.is_floating_point or repeats.ndim > 1 or repeats.numel() not in (1, size):
            raise ValueError(f"repeat_interleave: repeats must be an integer tensor of 1 or {size} counts, got "
                             f"{repeats.dtype.name} of shape {fmt_shape(repeats.shape)}")
        counts = np.asarray(repeats.numpy()).reshape(-1)
    else:
        counts = np.asarray([int(repeats)])
    if (counts < 0).any():
        raise ValueError("repeat_interleave: repeats must be non-negative")
    index = np.repeat(np.arange(size), counts if counts.size == size else int(counts[0]))
    if output_size is not None and index.size != output_size:
        raise ValueError(f"repeat_interleave: output_size={output_size} but the repeats give {index.size}")
    return index_select(input, d, creation.tensor(index, device=input.device))


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The n-th forward difference along `dim` (bool tensors: each pair's exclusive or), after prepending and
    appending the given tensors."""
    d = norm_dim("diff", dim, input.ndim)
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(int(n)):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = narrow(x, d, 1, size - 1), narrow(x, d, 0, size - 1)
        x = logical_xor(hi, lo) if x.dtype is dt.bool_ else hi - lo
    return x
