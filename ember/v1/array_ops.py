"""TF1's array ops by their TF names: reshape, transpose, concat, stack, squeeze, one_hot, where, tile, ..."""

from __future__ import annotations

import builtins

import numpy as np

from ember import dtypes as dt
from ember import ops
from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import norm_dim, spec
from ember.tensor import Tensor
from ember.v1.check_ops import check_indices
from ember.v1.constant_ops import constant, static_shape
from ember.v1.convert import convert_to_tensor, np_dtype, operands
from ember.v1.math_ops import element_count_op
from ember.v1.naming import tf_op
from ember.v1.static_shapes import has_unknown_rank, mark_unknown_rank, unknown_rank_error


def _tensors(values) -> list:
    """A list of tensors; plain data takes the dtype of the first tensor among them."""
    ref = next((v for v in values if isinstance(v, Tensor)), None)
    return [convert_to_tensor(v, dtype_hint=None if ref is None else ref.dtype) for v in values]


@tf_op("Reshape")
def reshape(tensor, shape, name: str | None = None) -> Tensor:
    """The same values in a new shape; one dimension may be -1."""
    x = convert_to_tensor(tensor)
    dims = tuple(-1 if d is None else d for d in static_shape(shape, "reshape"))
    return ops.reshape(x, dims)


@tf_op("transpose")
def transpose(a, perm=None, name: str | None = None, conjugate: bool = False) -> Tensor:
    """Dimensions permuted by `perm` (default: reversed)."""
    x = convert_to_tensor(a)
    if perm is None and has_unknown_rank(x):
        raise unknown_rank_error("transpose (reversing every dimension)", x)
    perm = tuple(reversed(range(x.ndim))) if perm is None else tuple(int(p) for p in perm)
    return ops.permute(x, perm)


@tf_op("concat")
def concat(values, axis: int, name: str = "concat") -> Tensor:
    """Tensors joined along an existing axis."""
    return ops.cat(_tensors(values), dim=int(axis))


@tf_op("stack")
def stack(values, axis: int = 0, name: str = "stack") -> Tensor:
    """Tensors of one shape joined along a new axis."""
    return ops.stack(_tensors(values), dim=int(axis))


@tf_op("unstack")
def unstack(value, num: int | None = None, axis: int = 0, name: str = "unstack") -> list:
    """The slices of a tensor along an axis of known size."""
    x = convert_to_tensor(value)
    if x.shape[axis] is None:
        raise ValueError(f"unstack: the size of axis {axis} is unknown (shape {x.shape}); it must be known")
    return list(ops.unbind(x, int(axis)))


@tf_op("ExpandDims")
def expand_dims(input, axis: int, name: str | None = None) -> Tensor:
    """A new axis of size 1 inserted at `axis`."""
    return ops.unsqueeze(convert_to_tensor(input), int(axis))


@tf_op("Squeeze")
def squeeze(input, axis=None, name: str | None = None, squeeze_dims=None) -> Tensor:
    """Axes of size 1 removed (all of them, or those listed in `axis`)."""
    x = convert_to_tensor(input)
    axis = squeeze_dims if axis is None else axis
    if axis is None:
        out = ops.squeeze(x)
        if None in tuple(x.shape):  # an unknown size may be 1 and go too: TF's static rank is then unknown
            mark_unknown_rank(out)
        return out
    axes = [axis] if isinstance(axis, int) else list(axis)
    for a in sorted((norm_dim("squeeze", a, x.ndim) for a in axes), reverse=True):
        if x.shape[a] not in (1, None):
            raise ValueError(f"squeeze: cannot squeeze axis {a} of size {x.shape[a]} (shape {x.shape})")
        x = ops.squeeze(x, a)
    return x


@tf_op("Tile")
def tile(input, multiples, name: str | None = None) -> Tensor:
    """The tensor repeated `multiples[i]` times along each axis i."""
    return ops.tile(convert_to_tensor(input), tuple(int(m) for m in multiples))


@tf_op("one_hot")
def one_hot(indices, depth: int, on_value=None, off_value=None, axis=None, dtype=None, name: str | None = None) -> Tensor:
    """A new last axis (or `axis`) of size `depth`: on_value at each index, off_value elsewhere."""
    idx = convert_to_tensor(indices)
    if dtype is None:
        given = next((v for v in (on_value, off_value) if v is not None), None)
        dtype = given.dtype if isinstance(given, Tensor) else (dt.float32 if given is None else None)
    on = convert_to_tensor(1 if on_value is None else on_value, dtype=dtype)
    off = convert_to_tensor(0 if off_value is None else off_value, dtype=on.dtype)
    classes = constant(np.arange(int(depth)), dtype=idx.dtype)
    out = ops.where(ops.eq(ops.unsqueeze(idx, -1), classes), on, off)
    if axis is not None and axis != -1:
        perm = list(range(out.ndim - 1))
        perm.insert(norm_dim("one_hot", axis, out.ndim), out.ndim - 1)
        out = ops.permute(out, tuple(perm))
    return out


@tf_op("Select")
def where(condition, x=None, y=None, name: str | None = None) -> Tensor:
    """x where condition holds, else y (a 1-D condition picks whole rows, as TF1)."""
    if x is None and y is None:
        raise NotImplementedError(
            "where(condition) returns the indices of true values, whose number is only known at run time; "
            "graphs here need static ranks and known output shapes. Use where(condition, x, y)."
        )
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither")
    cond = convert_to_tensor(condition)
    a, b = operands(x, y)
    ref = a if isinstance(a, Tensor) else b
    if cond.ndim == 1 and isinstance(ref, Tensor) and ref.ndim > 1:
        cond = ops.reshape(cond, (-1,) + (1,) * (ref.ndim - 1))
    return ops.where(cond, a, b)


@tf_op("GatherV2")
def gather(params, indices, axis: int = 0, name: str | None = None) -> Tensor:
    """Slices of `params` along `axis` at `indices` (any shape of indices)."""
    x = convert_to_tensor(params)
    idx = convert_to_tensor(indices)
    axis = norm_dim("gather", int(axis), x.ndim)
    idx = check_indices(idx, x, axis, "indices[{index}] = {value} is not in [0, {limit})")
    if idx.ndim == 1:
        return ops.index_select(x, axis, idx)
    out_shape = tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:])
    if sum(d is None for d in out_shape) > 1:
        raise ValueError(f"gather: the result shape {out_shape} has more than one unknown dimension")
    picked = ops.index_select(x, axis, ops.reshape(idx, (-1,)))
    return ops.reshape(picked, tuple(-1 if d is None else d for d in out_shape))


@tf_op("Slice")
def slice(input_, begin, size, name: str | None = None) -> Tensor:
    """The block starting at `begin` with `size` elements per axis (-1: to the end)."""
    x = convert_to_tensor(input_)
    index = tuple(builtins.slice(int(b), None if int(s) == -1 else int(b) + int(s)) for b, s in zip(begin, size))
    return x[index]


@tf_op("split")
def split(value, num_or_size_splits, axis: int = 0, num=None, name: str = "split") -> list:
    """Pieces along `axis`: an int gives that many equal pieces, a list gives the piece sizes."""
    x = convert_to_tensor(value)
    if isinstance(num_or_size_splits, int):
        size = x.shape[axis]
        if size is None or size % num_or_size_splits:
            raise ValueError(f"split: axis {axis} of shape {x.shape} cannot be split into {num_or_size_splits} pieces")
        return list(ops.split(x, size // num_or_size_splits, int(axis)))
    return list(ops.split(x, [int(s) for s in num_or_size_splits], int(axis)))


class DynamicShapeOp(Op):
    """The shape of the input as a 1-D integer tensor, known when the graph runs."""

    name = "dynamic_shape"
    differentiable = False
    fresh_output = True

    def infer(self, x, dtype):
        return spec((len(x.shape),), dtype)

    def kernel(self, xp, x, dtype):
        return xp.asarray(x.shape, dtype=dtype)


dynamic_shape_op = register(DynamicShapeOp())


@tf_op("Shape")
def shape(input, name: str | None = None, out_type=dt.int32) -> Tensor:
    """The run-time shape of a tensor, as a 1-D int32 tensor."""
    return apply(dynamic_shape_op, convert_to_tensor(input), dtype=np_dtype(out_type))


@tf_op("Size")
def size(input, name: str | None = None, out_type=dt.int32) -> Tensor:
    """The run-time number of elements of a tensor."""
    x = convert_to_tensor(input)
    dims = None if has_unknown_rank(x) else tuple(range(x.ndim))
    return apply(element_count_op, x, dims=dims, dtype=np_dtype(out_type))


class RankOfOp(Op):
    """The number of dimensions of the input, known when the graph runs (for an input of unknown rank)."""

    name = "rank_of"
    differentiable = False
    fresh_output = True

    def infer(self, x, dtype):
        return spec((), dtype)

    def kernel(self, xp, x, dtype):
        return xp.asarray(x.ndim, dtype=dtype)


rank_of_op = register(RankOfOp())


@tf_op("Rank")
def rank(input, name: str | None = None) -> Tensor:
    """The number of dimensions, as an int32 scalar tensor (a constant where the rank is known statically)."""
    x = convert_to_tensor(input)
    if has_unknown_rank(x):
        return apply(rank_of_op, x, dtype=np.dtype(np.int32))
    return constant(x.ndim, dtype=dt.int32)
