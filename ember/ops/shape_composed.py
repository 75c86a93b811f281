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


# --- stacking, splitting and flat reads ---------------------------------------------------------------------------
def column_stack(tensors):
    """The tensors side by side as columns: 0-d and 1-d ones as (n, 1), then concatenated along dim 1."""
    from ember.ops.shape import hstack

    return hstack([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors])


def row_stack(tensors):
    """vstack's other name: the tensors as rows (1-d ones as (1, n)), concatenated along dim 0."""
    from ember.ops.shape import vstack

    return vstack(tensors)


def dstack(tensors):
    """The tensors, made at least 3-d, concatenated along dim 2 (depth)."""
    return cat(list(atleast_3d(*tensors)), 2)


def _split_along(op: str, input, sections, dim: int, least: int):
    from ember.ops.split import tensor_split

    if input.ndim < least:
        raise ShapeError(f"{op}: expected a tensor of {least} dims or more, got shape {fmt_shape(input.shape)}")
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise ShapeError(f"{op}: dim {dim} of size {input.shape[dim]} does not split into {sections} equal parts")
    return tensor_split(input, sections, dim)


def hsplit(input, sections):
    """tensor_split along dim 1 (dim 0 of a 1-d tensor); an int must divide that dim."""
    return _split_along("hsplit", input, sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, sections):
    """tensor_split along dim 0 of a tensor of 2 dims or more; an int must divide that dim."""
    return _split_along("vsplit", input, sections, 0, 2)


def dsplit(input, sections):
    """tensor_split along dim 2 of a tensor of 3 dims or more; an int must divide that dim."""
    return _split_along("dsplit", input, sections, 2, 3)


def ravel(input):
    """The tensor as one dim (a view where it can be)."""
    return reshape(input, (-1,))


def take(input, index):
    """input's values at `index` (of any shape), input read as one flat dim; negative indices count from the end."""
    flat = reshape(input, (-1,))
    at = reshape(index, (-1,))
    at = where(at < 0, at + flat.shape[0], at)  # (one past either end stays out of bounds: index_select's error)
    return reshape(index_select(flat, 0, at), tuple(index.shape))


def adjoint(input):
    """The last two dims swapped (the conjugate transpose of a real tensor)."""
    if input.ndim < 2:
        raise ShapeError(f"adjoint: expected a tensor of 2 dims or more, got shape {fmt_shape(input.shape)}")
    return transpose(input, -2, -1)


def combinations(input, r: int = 2, with_replacement: bool = False):
    """The r-element combinations of a 1-d tensor's values, in order, one per row: (count, r)."""
    import itertools

    if input.ndim != 1:
        raise ShapeError(f"combinations: expected a 1-d tensor, got shape {fmt_shape(input.shape)}")
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    if not rows.size:
        return reshape(index_select(input, 0, creation.tensor(np.zeros(0, np.int64), device=input.device)), (0,))
    return reshape(index_select(input, 0, creation.tensor(rows.reshape(-1), device=input.device)), rows.shape)


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of a 1-d x: column k is x ** (N - 1 - k) (x ** k with increasing); N = len(x)."""
    from ember.ops.elementwise import pow

    if x.ndim != 1:
        raise ShapeError(f"vander: expected a 1-d tensor, got shape {fmt_shape(x.shape)}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    powers = np.arange(n) if increasing else np.arange(n)[::-1].copy()
    columns = [pow(x, int(k)) for k in powers]
    return stack(columns, 1) if columns else reshape(x, (-1, 1))[:, :0]


# --- writing parts of a tensor (PyTorch's *_scatter, index_copy, index_fill, masked_scatter) -------------------------
def _placed(input, source, slots: np.ndarray):
    """input with position p holding source's flat value slots[p] wherever slots[p] >= 0: gradients flow to the kept
    values of input and to the placed values of source."""
    placed = slots >= 0
    flat = reshape(source, (-1,))
    picked = index_select(flat, 0, creation.tensor(np.where(placed, slots, 0).reshape(-1), device=input.device))
    mask = creation.tensor(placed, device=input.device)
    return where(mask, reshape(picked, tuple(input.shape)).to(input.dtype), input)


def _slots(shape) -> np.ndarray:
    return np.full(tuple(shape), -1, np.int64)


def _source_ids(source, expected, op: str) -> np.ndarray:
    if tuple(source.shape) != tuple(expected):
        raise ShapeError(f"{op}: expected a source of shape {fmt_shape(expected)}, got {fmt_shape(source.shape)}")
    return np.arange(int(np.prod(expected, dtype=np.int64))).reshape(expected)


def select_scatter(input, src, dim: int, index: int):
    """input with input.select(dim, index) replaced by src."""
    dim = norm_dim("select_scatter", dim, input.ndim)
    slots = _slots(input.shape)
    view = np.moveaxis(slots, dim, 0)
    view[index] = _source_ids(src, view.shape[1:], "select_scatter")
    return _placed(input, src, slots)


def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1):
    """input with input[..., start:end:step, ...] (along dim) replaced by src."""
    dim = norm_dim("slice_scatter", dim, input.ndim)
    slots = _slots(input.shape)
    view = np.moveaxis(slots, dim, 0)[slice(start, end, step)]
    view[...] = np.moveaxis(_source_ids(src, np.moveaxis(view, 0, dim).shape, "slice_scatter"), dim, 0)
    return _placed(input, src, slots)


def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """input with its diagonal (offset, dim1, dim2) replaced by src (whose last dim runs along the diagonal)."""
    d1, d2 = norm_dim("diagonal_scatter", dim1, input.ndim), norm_dim("diagonal_scatter", dim2, input.ndim)
    slots = _slots(input.shape)
    view = np.moveaxis(slots, (d1, d2), (-2, -1))
    rows = np.arange(max(0, min(view.shape[-2] + min(offset, 0), view.shape[-1] - max(offset, 0))))
    ids = _source_ids(src, view.shape[:-2] + (rows.size,), "diagonal_scatter")
    view[..., rows - min(offset, 0), rows + max(offset, 0)] = ids
    return _placed(input, src, slots)


def _index_positions(op: str, input, dim: int, index) -> tuple:
    dim = norm_dim(op, dim, input.ndim) if input.ndim else 0
    at = np.asarray(index.numpy() if hasattr(index, "numpy") else index).astype(np.int64).reshape(-1)
    size = input.shape[dim] if input.ndim else 1
    if at.size and (at.min() < -size or at.max() >= size):
        raise IndexError(f"{op}: index {at.tolist()} is out of bounds for dim {dim} of size {size}")
    return dim, at % max(size, 1)


def index_copy(input, dim: int, index, source):
    """input with its slices `index` along dim replaced by source's, in order (a repeated index: the last)."""
    dim, at = _index_positions("index_copy", input, dim, index)
    slots = _slots(input.shape)
    view = np.moveaxis(slots, dim, 0)
    expected = np.moveaxis(view[at], 0, dim).shape if input.ndim else ()
    view[at] = np.moveaxis(_source_ids(source, expected, "index_copy"), dim, 0) if input.ndim else 0
    return _placed(input, source, slots)


def index_fill(input, dim: int, index, value):
    """input with its slices `index` along dim set to value (a number or a 0-d tensor)."""
    dim, at = _index_positions("index_fill", input, dim, index)
    mask = np.zeros(tuple(input.shape), bool)
    np.moveaxis(mask, dim, 0)[at] = True
    fill = value if hasattr(value, "shape") else creation.tensor(value, dtype=input.dtype, device=input.device)
    return where(creation.tensor(mask, device=input.device), fill.to(input.dtype), input)


def masked_scatter(input, mask, source):
    """input with the positions where mask (broadcast to input) is True filled by source's leading values, in order."""
    chosen = np.broadcast_to(np.asarray(mask.numpy()).astype(bool), tuple(input.shape))
    count = int(chosen.sum())
    if source.numel() < count:
        raise ShapeError(f"masked_scatter: the mask selects {count} values, the source has only {source.numel()}")
    slots = _slots(input.shape)
    slots[chosen] = np.arange(count)
    return _placed(input, source, slots)


# --- integration --------------------------------------------------------------------------------------------------
def _trapezoids(op: str, y, x, dx, dim: int):
    from ember.ops.shape import narrow as _narrow

    dim = norm_dim(op, dim, y.ndim)
    n = y.shape[dim]
    if n == 0:
        return None, dim
    left, right = _narrow(y, dim, 0, n - 1), _narrow(y, dim, 1, n - 1)
    if x is not None:
        if dx is not None:
            raise ValueError(f"{op}: pass x or dx, not both")
        spacing = diff(x, 1, dim if x.ndim == y.ndim else -1)
        if x.ndim == 1 and y.ndim > 1:
            spacing = reshape(spacing, (-1,) + (1,) * (y.ndim - 1 - dim))
        return (left + right) * spacing / 2, dim
    return (left + right) * (1.0 if dx is None else dx) / 2, dim


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The trapezoidal rule's integral of y along dim, at points x (1-d, or y's shape) or spacing dx (default 1)."""
    from ember.ops.reduction import sum as _sum

    areas, dim = _trapezoids("trapezoid", y, x, dx, dim)
    if areas is None:
        return _sum(y, dim) * 0
    return _sum(areas, dim)


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """trapezoid's older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running trapezoidal integral of y along dim (one value fewer than y there)."""
    from ember.ops.sorting import cumsum

    areas, dim = _trapezoids("cumulative_trapezoid", y, x, dx, dim)
    if areas is None:
        return y
    return cumsum(areas, dim)
