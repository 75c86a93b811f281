"""Manipulation functions: broadcast, concat/stack/unstack, expand_dims, squeeze, flip, roll, permute, repeat, tile."""

from __future__ import annotations

from ember import creation, dtypes, errors, ops
from ember.array_api._dtypes import result_type
from ember.array_api._helpers import check_array, norm_axes
from ember.tensor import Tensor


def broadcast_arrays(*arrays):
    """The arrays broadcast to one shape."""
    return list(ops.broadcast_tensors(*arrays))


def broadcast_to(x, /, shape):
    """x broadcast to shape."""
    return ops.broadcast_to(check_array("broadcast_to", x), tuple(shape))


def _same_dtype(fn, arrays):
    arrays = [check_array(fn, a) for a in arrays]
    dtype = result_type(*arrays)
    return [a.to(dtype) for a in arrays]


def concat(arrays, /, *, axis=0):
    """The arrays joined along axis (axis=None flattens them first)."""
    arrays = _same_dtype("concat", arrays)
    if axis is None:
        return ops.cat([ops.reshape(a, (-1,)) for a in arrays], 0)
    return ops.cat(arrays, axis)


def stack(arrays, /, *, axis=0):
    """The arrays joined along a new axis."""
    return ops.stack(_same_dtype("stack", arrays), axis)


def unstack(x, /, *, axis=0):
    """The slices of x along axis, as a tuple."""
    return tuple(ops.unbind(check_array("unstack", x), axis))


def expand_dims(x, /, axis=0):
    """x with new axes of size 1 at axis (an int or, as 2025.12 allows, a tuple; negative axes count from
    the end of the result)."""
    check_array("expand_dims", x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = x.ndim + len(axes)
    for a in axes:
        if not -n <= a < n:
            raise IndexError(f"array_api.expand_dims: axis {a} is out of range for a {n}-d result")
    new = sorted(a % n for a in axes)
    if len(set(new)) != len(new):
        raise ValueError(f"array_api.expand_dims: axis {axis} names an axis more than once")
    shape, it = [], iter(x.shape)
    for i in range(n):
        shape.append(1 if i in new else next(it))
    return ops.reshape(x, tuple(shape))


def squeeze(x, /, axis):
    """x without the size-1 axes named (an error if one is not size 1)."""
    check_array("squeeze", x)
    axes = norm_axes("squeeze", axis, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"array_api.squeeze: axis {a} has size {x.shape[a]}, not 1 (shape {tuple(x.shape)})")
    return ops.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def flip(x, /, *, axis=None):
    """x with the order of elements reversed along axis (all axes by default)."""
    check_array("flip", x)
    axes = norm_axes("flip", axis, x.ndim)
    return ops.flip(x, axes) if axes else ops.clone(x)


def roll(x, /, shift, *, axis=None):
    """x with elements shifted along axis, wrapping around (flattened when axis is None)."""
    check_array("roll", x)
    if axis is None:
        return ops.reshape(ops.roll(ops.reshape(x, (-1,)), shift, 0), x.shape)
    return ops.roll(x, shift, axis)


def permute_dims(x, /, axes):
    """x with its axes reordered."""
    return ops.permute(check_array("permute_dims", x), tuple(axes))


def moveaxis(x, source, destination, /):
    """x with the source axes moved to destination."""
    return ops.movedim(check_array("moveaxis", x), source, destination)


def reshape(x, /, shape, *, copy=None):
    """x with a new shape (copy=True always copies; copy=False never does)."""
    check_array("reshape", x)
    shape = tuple(shape)
    if copy:
        return ops.reshape(ops.clone(x), shape)
    if copy is False:
        return ops.view(x, shape)
    return ops.reshape(x, shape)


def tile(x, repetitions, /):
    """x repeated `repetitions` times along each axis."""
    return ops.tile(check_array("tile", x), tuple(repetitions))


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated `repeats` times (an int or a 1-d array) along axis (flattened when None)."""
    check_array("repeat", x)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = norm_axes("repeat", axis, x.ndim)[0]
    counts = repeats.tolist() if isinstance(repeats, Tensor) else repeats
    n = x.shape[axis]
    if isinstance(counts, int):
        counts = [counts] * n
    if len(counts) == 1 and n != 1:
        counts = counts * n
    if len(counts) != n:
        raise ValueError(f"array_api.repeat: {len(counts)} repeats for an axis of size {n}")
    if any(c < 0 for c in counts):
        raise ValueError("array_api.repeat: repeats must be non-negative")
    index = creation.tensor([i for i, c in enumerate(counts) for _ in range(c)], dtype=dtypes.int64, device=x.device)
    return ops.index_select(x, axis, index)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (a ValueError when they do not)."""
    from ember.ops._rules import broadcast_shapes as _bs

    try:
        return _bs("broadcast_shapes", *[tuple(s) for s in shapes]) if shapes else ()
    except errors.ShapeError as e:
        raise ValueError(str(e)) from None
