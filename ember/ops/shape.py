"""Shape ops: views (reshape, transpose, expand, squeeze, ...) and copies (cat, repeat, flip, pad, ...)."""

from __future__ import annotations

import math

import numpy as np

from ember.dispatch import apply, unary_path
from ember.errors import ShapeError, fmt_shape
from ember.kernels import batch_norm
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, norm_dim, result_dtype, spec
from ember.ops.opmath import opmath, rounded, upcast


def _known_numel(shape):
    return None if any(d is None for d in shape) else math.prod(shape)


def infer_reshape(op: str, in_shape, shape) -> tuple:
    """Resolve -1 in a requested shape and check the element count."""
    shape = tuple(d if d is None or isinstance(d, int) else int(d) for d in shape)  # symbolic sizes stay
    if sum(1 for d in shape if d == -1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {fmt_shape(shape)}")
    for d in shape:
        if d is not None and d < -1:
            raise ShapeError(f"{op}: invalid dimension {d} in shape {fmt_shape(shape)}")
    total = _known_numel(in_shape)
    if -1 in shape:
        rest = _known_numel([d for d in shape if d != -1])
        if total is None or rest is None:
            return tuple(None if d == -1 else d for d in shape)
        if rest == 0 or total % rest:
            raise ShapeError(f"{op}: shape {fmt_shape(shape)} is invalid for input of size {total}")
        return tuple(total // rest if d == -1 else d for d in shape)
    new_total = _known_numel(shape)
    if total is not None and new_total is not None and total != new_total:
        raise ShapeError(
            f"{op}: shape {fmt_shape(shape)} is invalid for input of shape {fmt_shape(in_shape)} (size {total})"
        )
    return shape


def _shape_arg(shape):
    """Accept reshape(2, 3) and reshape((2, 3))."""
    if len(shape) == 1:
        first = shape[0]
        if type(first) is tuple:
            return first
        if type(first) is int:  # reshape(-1): checked before hasattr, whose miss on an int costs 0.3 us
            return shape
        if isinstance(first, (tuple, list)):
            return tuple(first)
        if hasattr(first, "tolist") and not isinstance(first, int):
            return tuple(first.tolist())
    return tuple(shape)


class ReshapeOp(Op):
    name = "reshape"
    is_view = "maybe"

    def infer(self, x, shape):
        return spec(infer_reshape(self.name, x.shape, shape), x.dtype)

    def kernel(self, xp, x, shape):
        if shape and min(shape) < -1:  # NumPy reads any negative size as -1; PyTorch rejects them
            infer_reshape(self.name, x.shape, shape)
        return x.reshape(shape)  # NumPy resolves -1; on failure the shape rule explains

    def vjp(self, ctx, g):
        return (reshape(g, ctx.in_shape(0)),)


_reshape_op = register(ReshapeOp())
_reshape_path = unary_path(_reshape_op)


class ViewOp(Op):
    name = "view"
    is_view = True

    def infer(self, x, shape):
        return spec(infer_reshape(self.name, x.shape, shape), x.dtype)

    def kernel(self, xp, x, shape):
        if xp is np and x.flags.c_contiguous and min(shape, default=0) >= -1:
            return x.reshape(shape)  # always a view (a wrong size raises, and the shape rule then explains)
        new = infer_reshape(self.name, x.shape, shape)
        try:
            return xp.reshape(x, new, copy=False)
        except ValueError:
            raise RuntimeError(
                f"view: shape {fmt_shape(new)} is not compatible with the input's size and stride "
                f"(shape {fmt_shape(x.shape)}, not contiguous); use .reshape(...) instead"
            ) from None

    def vjp(self, ctx, g):
        return (reshape(g, ctx.in_shape(0)),)


_view_op = register(ViewOp())
_view_path = unary_path(_view_op)


def reshape(input, *shape):
    """Same data in a new shape (a view when possible); one dimension may be -1."""
    if shape:  # _shape_arg's two common answers inline (a call fewer on a hot path)
        first = shape[0]
        if type(first) is int:  # reshape(-1), reshape(2, 3): the arguments are the shape
            return _reshape_path(input, shape=shape)
        if type(first) is tuple and len(shape) == 1:  # reshape((2, 3))
            return _reshape_path(input, shape=first)
    return _reshape_path(input, shape=_shape_arg(shape))


def view(input, *shape):
    """A view with a new shape; an error when the layout makes a view impossible."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)):
        from ember.dtypes import as_dtype

        dtype = as_dtype(shape[0])
        if dtype.np != input._data.dtype:
            raise NotImplementedError("view(dtype) reinterpretation is not supported; use .to(dtype)")
        return input
    return _view_path(input, shape=_shape_arg(shape))


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    """Merge dims start_dim..end_dim into one."""
    shape = tuple(input._data.shape)
    if not shape:
        return reshape(input, (1,))
    nd = len(shape)
    s = start_dim if type(start_dim) is int and 0 <= start_dim < nd else norm_dim("flatten", start_dim, nd)
    e = nd - 1 if end_dim == -1 and type(end_dim) is int else norm_dim("flatten", end_dim, nd)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    if s == e:  # nothing to merge: the input itself, as PyTorch returns it
        return input
    mid = shape[s : e + 1]
    merged = None if any(d is None for d in mid) else math.prod(mid)
    return reshape(input, shape[:s] + (merged if merged is not None else -1,) + shape[e + 1 :])


def unflatten(input, dim: int, sizes):
    """Split one dim into `sizes` (one entry may be -1)."""
    shape = tuple(input.shape)
    d = norm_dim("unflatten", dim, len(shape))
    sizes = tuple(sizes)
    if -1 not in sizes and shape[d] is not None and math.prod(sizes) != shape[d]:
        raise ShapeError(f"unflatten: sizes {fmt_shape(sizes)} don't multiply up to dimension {dim} of size {shape[d]}")
    return reshape(input, shape[:d] + sizes + shape[d + 1 :])


# Checked permutations by (rank, dims as given): the check (negative dims, duplicates) cost 2-3 us a call, as
# much as the rest of a permute; a transformer step permutes 25 times.
_PERMUTATIONS: dict = {}


class PermuteOp(Op):
    name = "permute"
    is_view = True

    def _check(self, x, dims):
        nd = len(x.shape)
        key = (nd, dims)
        norm = _PERMUTATIONS.get(key)
        if norm is not None:
            return norm
        if len(dims) != nd:
            raise ShapeError(f"permute: dims {tuple(dims)} must name all {nd} dimensions of shape {fmt_shape(x.shape)}")
        norm = tuple(norm_dim("permute", d, nd) for d in dims)
        if sorted(norm) != list(range(nd)):
            raise ValueError(f"permute: dims {tuple(dims)} are not a permutation of 0..{nd - 1}")
        if type(dims) is tuple and len(_PERMUTATIONS) < 1024:
            _PERMUTATIONS[key] = norm
        return norm

    def infer(self, x, dims):
        dims = self._check(x, dims)
        return spec(tuple(x.shape[d] for d in dims), x.dtype)

    def kernel(self, xp, x, dims):
        return x.transpose(self._check(x, dims))  # the method: NumPy's function form wraps it in Python

    def vjp(self, ctx, g):
        dims = self._check(spec(ctx.in_shape(0), ctx.in_dtype(0)), ctx.attrs["dims"])
        return (permute(g, tuple(np.argsort(dims).tolist())),)


_permute_op = register(PermuteOp())
_permute_path = unary_path(_permute_op)


def permute(input, *dims):
    """Reorder dimensions (a view)."""
    return apply(_permute_op, input, dims=tuple(_shape_arg(dims)))


def transpose(input, dim0: int, dim1: int):
    """Swap two dimensions (a view)."""
    nd = len(input._data.shape)
    if nd == 0:
        return input
    a = dim0 % nd if type(dim0) is int and -nd <= dim0 < nd else norm_dim("transpose", dim0, nd)
    b = dim1 % nd if type(dim1) is int and -nd <= dim1 < nd else norm_dim("transpose", dim1, nd)
    dims = list(range(nd))
    dims[a], dims[b] = dims[b], dims[a]
    return _permute_path(input, dims=tuple(dims))


swapaxes = swapdims = transpose


def t(input):
    """Transpose a tensor of at most 2 dimensions."""
    if input.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, got shape {fmt_shape(input.shape)}")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def movedim(input, source, destination):
    """Move dims from `source` positions to `destination` positions."""
    nd = input.ndim
    src = [norm_dim("movedim", s, nd) for s in (source if isinstance(source, (tuple, list)) else [source])]
    dst = [norm_dim("movedim", d, nd) for d in (destination if isinstance(destination, (tuple, list)) else [destination])]
    order = [d for d in range(nd) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _permute_path(input, dims=tuple(order))


moveaxis = movedim


class ExpandOp(Op):
    name = "expand"
    is_view = True

    def _target(self, x, shape):
        shape = tuple(shape)
        nd = len(x.shape)
        if len(shape) < nd:
            raise ShapeError(
                f"expand: the number of sizes {len(shape)} must be at least the tensor's dimensions "
                f"({fmt_shape(x.shape)})"
            )
        lead = len(shape) - nd
        out = []
        for i, s in enumerate(shape):
            if i < lead:
                if s == -1:
                    raise ShapeError(f"expand: -1 is not allowed for a new leading dimension in {fmt_shape(shape)}")
                out.append(s)
                continue
            d = x.shape[i - lead]
            if s == -1 or s == d:
                out.append(d)
            elif d == 1 or d is None:
                out.append(s)
            else:
                raise ShapeError(
                    f"expand: the expanded size {s} must match the existing size {d} at dimension {i} "
                    f"(shape {fmt_shape(x.shape)} to {fmt_shape(shape)})"
                )
        return tuple(out)

    def infer(self, x, shape):
        return spec(self._target(x, shape), x.dtype)

    def kernel(self, xp, x, shape):
        # The same read-only view as np.broadcast_to, made by the ndarray constructor: broadcast_to's Python
        # wrapper costs 1 us more, and sum's gradient expands on every backward pass.
        if xp is np and not x.shape and type(shape) is tuple and min(shape, default=0) >= 0:
            # a 0-d value (a full reduction's gradient) takes any size of non-negative ints, every stride 0
            view = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
            view.flags.writeable = False
            return view
        target = self._target(x, shape)
        if xp is np and x.flags.c_contiguous:
            lead = len(target) - x.ndim
            strides = (0,) * lead + tuple(0 if d == 1 else s for d, s in zip(x.shape, x.strides))
            view = np.ndarray(target, x.dtype, x, 0, strides)
            view.flags.writeable = False
            return view
        return xp.broadcast_to(x, target)

    def vjp(self, ctx, g):
        return (sum_to_size(g, ctx.in_shape(0)),)


_expand_op = register(ExpandOp())
_expand_path = unary_path(_expand_op)


def expand(input, *shape):
    """Broadcast to a larger shape without copying (-1 keeps a dim); the result is read-only."""
    shape = _shape_arg(shape)
    data = input._data
    if (data.shape if type(data) is np.ndarray else tuple(input.shape)) == shape:
        return input
    return _expand_path(input, shape=shape)


def broadcast_to(input, shape):
    """expand to `shape`."""
    return expand(input, tuple(shape))


def expand_as(input, other):
    """expand to other's shape."""
    return expand(input, tuple(other.shape))


def broadcast_tensors(*tensors):
    """Expand tensors to their common broadcast shape."""
    from ember.ops._rules import broadcast_shapes

    shape = broadcast_shapes("broadcast_tensors", *[tuple(t.shape) for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


class SumToSizeOp(Op):
    name = "sum_to_size"

    def _axes(self, in_shape, shape):
        lead = len(in_shape) - len(shape)
        if lead < 0:
            raise ShapeError(f"sum_to_size: cannot reduce shape {fmt_shape(in_shape)} to the larger {fmt_shape(shape)}")
        axes = list(range(lead))
        for i, s in enumerate(shape):
            d = in_shape[lead + i]
            if s == 1 and d != 1:
                axes.append(lead + i)
            elif s != d and d is not None and s is not None:
                raise ShapeError(f"sum_to_size: shape {fmt_shape(in_shape)} is not expandable from {fmt_shape(shape)}")
        return tuple(axes), lead

    def infer(self, x, shape):
        self._axes(tuple(x.shape), tuple(shape))
        return spec(tuple(shape), x.dtype)

    def kernel(self, xp, x, shape):
        axes, lead = self._axes(x.shape, tuple(shape))
        if not axes:
            return xp.asarray(x).reshape(shape)
        out = batch_norm.channel_sum(xp, x, axes, True) if lead == 0 else None  # to (1, C, 1, 1)?
        if out is not None:
            return out
        # float16/bfloat16 (broadcast gradients) are summed in float32 and rounded once
        out = xp.sum(upcast(x), axis=axes, keepdims=True, dtype=opmath(x.dtype))
        return xp.asarray(rounded(out, x.dtype)).reshape(shape)

    def vjp(self, ctx, g):
        return (expand(g, ctx.in_shape(0)),)


_sum_to_size_op = register(SumToSizeOp())


def sum_to_size(input, *shape):
    """Sum a broadcast tensor down to `shape` (the adjoint of expand)."""
    shape = _shape_arg(shape)
    if tuple(input.shape) == shape:
        return input
    return apply(_sum_to_size_op, input, shape=shape)


class SqueezeOp(Op):
    name = "squeeze"
    is_view = True

    def _dims(self, x, dim):
        nd = len(x.shape)
        if dim is None:
            return tuple(i for i, d in enumerate(x.shape) if d == 1)
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        return tuple(i for i in (norm_dim("squeeze", d, nd) for d in dims) if nd and x.shape[i] == 1)

    def infer(self, x, dim=None):
        drop = self._dims(x, dim)
        return spec(tuple(d for i, d in enumerate(x.shape) if i not in drop), x.dtype)

    def kernel(self, xp, x, dim=None):
        return xp.squeeze(x, axis=self._dims(x, dim))

    def vjp(self, ctx, g):
        return (reshape(g, ctx.in_shape(0)),)


_squeeze_op = register(SqueezeOp())
_squeeze_path = unary_path(_squeeze_op)


def squeeze(input, dim=None):
    """Drop dims of size 1 (all, or those named; a named dim of another size is left alone)."""
    return _squeeze_path(input, dim=tuple(dim) if isinstance(dim, list) else dim)


class UnsqueezeOp(Op):
    name = "unsqueeze"
    is_view = True

    def _dim(self, x, dim):
        nd = len(x.shape) + 1
        if not -nd <= dim < nd:
            raise IndexError(f"unsqueeze: dimension {dim} is out of range for a result of {nd} dimensions")
        return dim % nd

    def infer(self, x, dim):
        d = self._dim(x, dim)
        s = tuple(x.shape)
        return spec(s[:d] + (1,) + s[d:], x.dtype)

    def kernel(self, xp, x, dim):
        if xp is np:  # a size-1 dim inserted is always a view; NumPy's expand_dims costs 1.5 us more
            d = self._dim(x, dim)
            return x.reshape(x.shape[:d] + (1,) + x.shape[d:])
        return xp.expand_dims(x, self._dim(x, dim))

    def vjp(self, ctx, g):
        return (reshape(g, ctx.in_shape(0)),)


_unsqueeze_op = register(UnsqueezeOp())
_unsqueeze_path = unary_path(_unsqueeze_op)


def unsqueeze(input, dim: int):
    """Insert a dim of size 1 at `dim` (a view)."""
    return _unsqueeze_path(input, dim=dim)


class CatOp(Op):
    name = "cat"
    fresh_output = True

    def infer(self, *xs, dim=0):
        if not xs:
            raise ValueError("cat: expected a non-empty list of tensors")
        ref = next((x for x in xs if tuple(x.shape) != (0,)), xs[0])
        nd = len(ref.shape)
        if nd == 0:
            raise ShapeError("cat: zero-dimensional tensors cannot be concatenated; use stack")
        d = norm_dim("cat", dim, nd)
        total = 0
        for i, x in enumerate(xs):
            if tuple(x.shape) == (0,) and nd != 1:
                continue  # legacy: empty 1-D tensors are skipped, as PyTorch does
            if len(x.shape) != nd:
                raise ShapeError(
                    f"cat: tensors must have the same number of dimensions: tensor 0 has shape "
                    f"{fmt_shape(ref.shape)} but tensor {i} has shape {fmt_shape(x.shape)}"
                )
            for k in range(nd):
                if k != d and x.shape[k] != ref.shape[k] and None not in (x.shape[k], ref.shape[k]):
                    raise ShapeError(
                        f"cat: sizes must match except in dimension {d}: got {fmt_shape(ref.shape)} and "
                        f"{fmt_shape(x.shape)} (tensor {i})"
                    )
            total = None if total is None or x.shape[d] is None else total + x.shape[d]
        shape = tuple(total if k == d else ref.shape[k] for k in range(nd))
        return spec(shape, result_dtype(*[spec((1,), x.dtype) for x in xs]))

    def kernel(self, xp, *xs, dim=0):
        if xp is np:  # one dtype and rank: NumPy's concatenate checks the sizes (and the shape rule explains)
            first = xs[0]
            nd, dt = first.ndim, first.dtype
            if nd and type(dim) is int and -nd <= dim < nd:
                for x in xs:
                    if x.dtype != dt or x.ndim != nd:
                        break
                else:
                    return np.concatenate(xs, axis=dim)
        out = self.infer(*xs, dim=dim)
        keep = [x for x in xs if not (x.shape == (0,) and len(out.shape) != 1)]
        return xp.concatenate([x.astype(out.dtype, copy=False) for x in keep], axis=norm_dim("cat", dim, len(out.shape)))

    def vjp(self, ctx, g):
        nd = g.ndim
        d = norm_dim("cat", ctx.attrs.get("dim", 0), nd)
        grads, start = [], 0
        for i in range(len(ctx.in_meta)):
            shape = ctx.in_shape(i)
            if shape == (0,) and nd != 1:
                grads.append(None)
                continue
            n = shape[d]
            grads.append(narrow(g, d, start, n))
            start += n
        return tuple(grads)


_cat_op = register(CatOp())


def cat(tensors, dim: int = 0, *, axis=None):
    """Concatenate tensors along an existing dim."""
    if axis is not None:
        dim = axis
    tensors = list(tensors)
    return apply(_cat_op, *tensors, dim=dim)


concat = concatenate = cat


def stack(tensors, dim: int = 0, *, axis=None):
    """Join tensors along a new dim; all must have the same shape."""
    if axis is not None:
        dim = axis
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    ref = tuple(tensors[0]._data.shape)
    for i, x in enumerate(tensors):
        if tuple(x._data.shape) != ref:
            raise ShapeError(
                f"stack: expects each tensor to be equal size, but got {fmt_shape(ref)} at entry 0 and "
                f"{fmt_shape(x.shape)} at entry {i}"
            )
    nd = len(ref) + 1
    if not -nd <= dim < nd:
        raise IndexError(f"stack: dimension {dim} is out of range for a result of {nd} dimensions")
    return cat([unsqueeze(x, dim) for x in tensors], dim=dim)


def hstack(tensors):
    """Stack horizontally (along dim 1, or 0 for 1-D tensors)."""
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Stack vertically (1-D tensors become rows)."""
    return cat([x.reshape(1, -1) if x.ndim == 1 else x for x in tensors], 0)


def narrow(input, dim: int, start: int, length: int):
    """The slice [start, start+length) along `dim` (a view)."""
    d = norm_dim("narrow", dim, input.ndim)
    size = input.shape[d]
    if start < 0:
        start += size
    if size is not None and not (0 <= start and start + length <= size and length >= 0):
        raise IndexError(f"narrow: start {start} + length {length} exceeds dimension {dim} of size {size}")
    index = (slice(None),) * d + (slice(start, start + length),)
    from ember.ops.indexing import getitem

    return getitem(input, index)


def select(input, dim: int, index: int):
    """The slice at `index` along `dim`, that dim removed (a view; `index` may be negative)."""
    d = norm_dim("select", dim, input.ndim)
    size = input.shape[d]
    if type(index) is not int and not isinstance(index, np.integer):
        raise TypeError(f"select: index must be an int, got {type(index).__name__}")
    if size is not None and not -size <= index < size:
        raise IndexError(f"select: index {index} is out of range for dimension {dim} of size {size}")
    from ember.ops.indexing import getitem

    return getitem(input, (slice(None),) * d + (int(index),))


class RepeatOp(Op):
    name = "repeat"
    fresh_output = True

    def _reps(self, x, reps):
        if len(reps) < len(x.shape):
            raise ShapeError(
                f"repeat: number of repeat dims {len(reps)} can't be smaller than the tensor's "
                f"dimensions ({fmt_shape(x.shape)})"
            )
        return tuple(reps)

    def infer(self, x, reps):
        reps = self._reps(x, reps)
        shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
        return spec(tuple(None if s is None else s * r for s, r in zip(shape, reps)), x.dtype)

    def kernel(self, xp, x, reps):
        return xp.tile(x, self._reps(x, reps))

    def vjp(self, ctx, g):
        in_shape = ctx.in_shape(0)
        reps = ctx.attrs["reps"]
        shape = (1,) * (len(reps) - len(in_shape)) + in_shape
        inter = []
        for r, s in zip(reps, shape):
            inter += [r, s]
        from ember.ops.reduction import sum as _sum

        g = _sum(reshape(g, tuple(inter)), dim=tuple(range(0, 2 * len(reps), 2)))
        return (reshape(g, in_shape),)


_repeat_op = register(RepeatOp())


def repeat(input, *sizes):
    """Tile the tensor `sizes` times along each dim (PyTorch's repeat)."""
    return apply(_repeat_op, input, reps=_shape_arg(sizes))


def tile(input, dims):
    """Like repeat, but fewer dims than the tensor's mean leading 1s."""
    dims = tuple(dims)
    dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


class FlipOp(Op):
    name = "flip"
    fresh_output = True

    def infer(self, x, dims):
        for d in dims:
            norm_dim("flip", d, len(x.shape))
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, dims):
        return xp.flip(x, axis=tuple(norm_dim("flip", d, x.ndim) for d in dims)).copy()

    def vjp(self, ctx, g):
        return (flip(g, ctx.attrs["dims"]),)


_flip_op = register(FlipOp())


def flip(input, dims):
    """Reverse the order of elements along `dims`."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return apply(_flip_op, input, dims=dims)


def fliplr(input):
    """flip along dim 1."""
    return flip(input, (1,))


def flipud(input):
    """flip along dim 0."""
    return flip(input, (0,))


class RollOp(Op):
    name = "roll"
    fresh_output = True

    def infer(self, x, shifts, dims):
        if dims is not None:
            for d in dims if isinstance(dims, tuple) else (dims,):
                norm_dim("roll", d, len(x.shape))
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, shifts, dims):
        return xp.roll(x, shifts, axis=dims)

    def vjp(self, ctx, g):
        shifts = ctx.attrs["shifts"]
        neg = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return (roll(g, neg, ctx.attrs["dims"]),)


_roll_op = register(RollOp())


def roll(input, shifts, dims=None):
    """Shift elements cyclically along `dims` (flattened when dims is None)."""
    if isinstance(shifts, list):
        shifts = tuple(shifts)
    if isinstance(dims, list):
        dims = tuple(dims)
    if isinstance(shifts, tuple) and isinstance(dims, tuple) and len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    return apply(_roll_op, input, shifts=shifts, dims=dims)


class TriangleOp(Op):
    fresh_output = True
    def __init__(self, name):
        self.name = name

    def infer(self, x, diagonal=0):
        if len(x.shape) < 2:
            raise ShapeError(f"{self.name}: input must have at least 2 dimensions, got shape {fmt_shape(x.shape)}")
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, diagonal=0):
        self.infer(x, diagonal)
        return getattr(xp, self.name)(x, diagonal)

    def vjp(self, ctx, g):
        return (apply(self, g, diagonal=ctx.attrs.get("diagonal", 0)),)


from ember.op import register  # noqa: E402

_tril_op = register(TriangleOp("tril"))
_triu_op = register(TriangleOp("triu"))


def tril(input, diagonal: int = 0):
    """Keep the lower triangle (on and below `diagonal`) of the last two dims."""
    return apply(_tril_op, input, diagonal=diagonal)


def triu(input, diagonal: int = 0):
    """Keep the upper triangle (on and above `diagonal`) of the last two dims."""
    return apply(_triu_op, input, diagonal=diagonal)


def pad(input, pad, mode: str = "constant", value=None):
    """Pad the last len(pad)//2 dims; `pad` lists (left, right) pairs from the last dim backwards."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be even, got {len(pad)} values")
    n = len(pad) // 2
    if n > input.ndim:
        raise ShapeError(f"pad: {n} dims of padding for a tensor of shape {fmt_shape(input.shape)}")
    if mode == "constant":
        return apply(_pad_op, input, pad=pad, value=0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be constant, reflect, replicate or circular, got {mode!r}")
    # The other modes gather existing elements: express them as index_select so autograd is free.
    from ember.ops.creation_ops import arange_like
    from ember.ops.indexing import index_select

    out = input
    for i in range(n):
        left, right = pad[2 * i], pad[2 * i + 1]
        dim = input.ndim - 1 - i
        size = input.shape[dim]
        if mode == "reflect" and (left >= size or right >= size):
            raise ValueError(f"pad: reflect padding ({left}, {right}) must be smaller than dimension {dim} of size {size}")
        idx = np.arange(-left, size + right)
        if mode == "reflect":
            period = 2 * (size - 1) if size > 1 else 1
            idx = np.abs(idx) % period
            idx = np.where(idx >= size, period - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, size - 1)
        else:
            idx = idx % size
        out = index_select(out, dim, arange_like(out, idx))
    return out


class PadConstantOp(Op):
    name = "pad"
    fresh_output = True

    def _pads(self, x, pad):
        nd = len(x.shape)
        pairs = [(0, 0)] * nd
        for i in range(len(pad) // 2):
            pairs[nd - 1 - i] = (pad[2 * i], pad[2 * i + 1])
        return pairs

    def infer(self, x, pad, value=0):
        pairs = self._pads(x, pad)
        shape = []
        for d, (lo, hi) in zip(x.shape, pairs):
            size = None if d is None else d + lo + hi
            if size is not None and size < 0:
                raise ShapeError(f"pad: padding {pad} makes a negative size for shape {fmt_shape(x.shape)}")
            shape.append(size)
        return spec(tuple(shape), x.dtype)

    def kernel(self, xp, x, pad, value=0):
        pairs = self._pads(x, pad)
        if all(lo >= 0 and hi >= 0 for lo, hi in pairs):
            return xp.pad(x, pairs, mode="constant", constant_values=value)
        # negative padding crops
        out = self.infer(x, pad, value)
        crop = tuple(slice(max(-lo, 0), x.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pairs))
        return xp.pad(x[crop], [(max(lo, 0), max(hi, 0)) for lo, hi in pairs], constant_values=value).reshape(out.shape)

    def vjp(self, ctx, g):
        return (apply(_pad_op, g, pad=tuple(-p for p in ctx.attrs["pad"]), value=0),)


_pad_op = register(PadConstantOp())


class ContiguousOp(Op):
    name = "contiguous"
    is_view = "maybe"

    def infer(self, x):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x):
        return xp.ascontiguousarray(x)

    def vjp(self, ctx, g):
        return (g,)


_contiguous_op = register(ContiguousOp())


def contiguous(input):
    """A row-major tensor with the same values (itself when already contiguous)."""
    if input.is_contiguous():
        return input
    return apply(_contiguous_op, input)


class CloneOp(Op):
    name = "clone"
    elementwise = True
    inplace_ok = True
    fresh_output = True

    def infer(self, x):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x):
        return x.copy()

    def kernel_out(self, xp, x, *, out):
        """A copy of x in out."""
        if type(x) is np.ndarray and x.dtype == out.dtype and x.shape == out.shape:
            np.copyto(out, x)
            return out
        return self.kernel(xp, x)

    def vjp(self, ctx, g):
        return (g,)


_clone_op = register(CloneOp())


def clone(input):
    """A copy with its own storage (differentiable)."""
    return apply(_clone_op, input)


identity = clone


class CastOp(Op):
    name = "cast"
    elementwise = True
    inplace_ok = True
    fresh_output = True

    def infer(self, x, dtype):
        return spec(x.shape, dtype)

    def kernel(self, xp, x, dtype):
        if dtype.itemsize < x.dtype.itemsize and dtype in FLOAT_NP:
            with np.errstate(over="ignore"):  # out-of-range values become inf, quietly as in PyTorch
                return x.astype(dtype)
        return x.astype(dtype)

    def kernel_out(self, xp, x, *, dtype, out):
        """x converted to dtype, in out."""
        if type(x) is np.ndarray and out.dtype == np.dtype(dtype) and x.shape == out.shape:
            np.copyto(out, x, casting="unsafe")
            return out
        return self.kernel(xp, x, dtype=dtype)

    def vjp(self, ctx, g):
        return (g,)


_cast_op = register(CastOp())


def cast(input, dtype):
    """The values converted to `dtype` (a copy)."""
    from ember.dtypes import as_dtype

    return apply(_cast_op, input, dtype=as_dtype(dtype).np)


class DiagonalOp(Op):
    """The offset diagonal of the last two dims, as a strided view (writes reach the input)."""

    name = "diagonal"
    is_view = True

    def _length(self, n, m, offset):
        if n is None or m is None:
            return None
        return max(0, min(n + min(offset, 0), m - max(offset, 0)))

    def infer(self, x, offset=0):
        if len(x.shape) < 2:
            raise ShapeError(f"diagonal: input must have at least 2 dimensions, got shape {fmt_shape(x.shape)}")
        return spec(tuple(x.shape[:-2]) + (self._length(x.shape[-2], x.shape[-1], offset),), x.dtype)

    def kernel(self, xp, x, offset=0):
        k = self._length(x.shape[-2], x.shape[-1], offset)
        s_row, s_col = x.strides[-2], x.strides[-1]
        start = x[..., max(-offset, 0) :, max(offset, 0) :] if k else x[..., :0, :0]
        shape = x.shape[:-2] + (k,)
        strides = x.strides[:-2] + (s_row + s_col,)
        return xp.lib.stride_tricks.as_strided(start, shape=shape, strides=strides)

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import arange_like, zeros_like_shape
        from ember.ops.indexing import index_put

        shape = ctx.in_shape(0)
        offset = ctx.attrs.get("offset", 0)
        k = g.shape[-1]
        rows = arange_like(g, np.arange(k) + max(-offset, 0))
        cols = arange_like(g, np.arange(k) + max(offset, 0))
        return (index_put(zeros_like_shape(g, shape), (Ellipsis, rows, cols), g),)


_diagonal_op = register(DiagonalOp())


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The `offset` diagonal of the (dim1, dim2) planes, as the last dim (a view, as PyTorch)."""
    nd = input.ndim
    if nd < 2:
        raise ShapeError(f"diagonal: input must have at least 2 dimensions, got shape {fmt_shape(input.shape)}")
    d1, d2 = norm_dim("diagonal", dim1, nd), norm_dim("diagonal", dim2, nd)
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 must be different, got {dim1} and {dim2}")
    x = movedim(input, (d1, d2), (-2, -1))
    return apply(_diagonal_op, x, offset=int(offset))
