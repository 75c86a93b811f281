"""`as_strided`: a view of a tensor's storage with the sizes, strides and storage offset given (torch.as_strided).

As in PyTorch the strides and the offset count elements of the storage, not of the input's view of it. The
gradient is PyTorch's for any geometry: the output's gradient summed into a zero storage at each element's
position, then read back at the input's positions (divided by how often the input reads one position where it
overlaps itself, an expanded input), written in Ember ops so that it differentiates again.
"""

from __future__ import annotations

import numpy as np

from ember.backends.meta import MetaArray
from ember.dispatch import apply
from ember.errors import ConcretizationError, ShapeError
from ember.op import Op, register
from ember.ops._rules import spec


def _storage(a: np.ndarray) -> np.ndarray:
    """The array that owns `a`'s memory (NumPy collapses view chains to it)."""
    root = a
    while isinstance(getattr(root, "base", None), np.ndarray):
        root = root.base
    return root


def _offset(a: np.ndarray, root: np.ndarray) -> int:
    return (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // a.itemsize


def _positions(size: tuple, stride: tuple, offset: int) -> np.ndarray:
    """The storage position of each element of a (size, stride, offset) geometry, in its row-major order."""
    pos = np.full(size, offset, np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return pos.reshape(-1)


class AsStridedOp(Op):
    name = "as_strided"
    is_view = True

    def infer(self, x, size, stride, storage_offset, geometry):
        return spec(tuple(size), x.dtype)

    def kernel(self, xp, x, size, stride, storage_offset, geometry):
        if xp is not np:
            return xp.lib.stride_tricks.as_strided(x, size, tuple(s * x.itemsize for s in stride))
        root = _storage(x)
        flat = root.reshape(-1) if root.flags.c_contiguous else np.ascontiguousarray(root).reshape(-1)
        flat = flat.view(x.dtype) if flat.dtype != x.dtype else flat
        start = flat[storage_offset:] if storage_offset < flat.size else flat[:0]
        return np.lib.stride_tricks.as_strided(start, tuple(size), tuple(s * x.itemsize for s in stride),
                                               writeable=x.flags.writeable)

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape

        size, stride, offset, (in_size, in_stride, in_offset, storage_size) = (
            ctx.attrs["size"], ctx.attrs["stride"], ctx.attrs["storage_offset"], ctx.attrs["geometry"])
        out_pos = _positions(tuple(size), tuple(stride), offset)
        in_pos = _positions(tuple(in_size), tuple(in_stride), in_offset)
        storage = zeros_like_shape(g, (storage_size,))
        storage = storage.index_add(0, _index(out_pos, g), g.reshape(-1))
        grad = storage[_index(in_pos, g)]
        counts = np.bincount(in_pos, minlength=storage_size)[in_pos]
        if (counts > 1).any():  # an input that reads a position more than once shares its gradient out
            from ember.creation import tensor

            grad = grad / tensor(counts.astype(np.float64), dtype=g.dtype, device=g.device)
        return (grad.reshape(tuple(in_size)),)


def _index(positions: np.ndarray, like):
    from ember.creation import tensor

    return tensor(positions, device=like.device)


_as_strided_op = register(AsStridedOp())


def as_strided(input, size, stride, storage_offset: int | None = None):
    """A view of `input`'s storage with these sizes, strides and storage offset (in elements of the storage, as
    torch.as_strided); writes through it reach `input`."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise ShapeError(f"as_strided: mismatch in length of strides and shape ({len(stride)} strides for "
                         f"{len(size)} sizes)")
    if any(s < 0 for s in stride):
        raise ValueError(f"as_strided: negative strides are not supported, got {stride}")
    if any(n < 0 for n in size):
        raise ValueError(f"as_strided: negative sizes are not allowed, got {size}")
    data = input._data
    if isinstance(data, MetaArray) and data.symbolic:
        # a trace sees shapes, not the strides and storage offset this view is defined by: not a guess but an error
        # (ember.compile runs such a call eagerly)
        raise ConcretizationError(f"as_strided: the view depends on the memory layout of the input (shape "
                                  f"{tuple(input.shape)}), which ember.jit does not see while it traces; call "
                                  "as_strided outside the jitted function")
    if isinstance(data, MetaArray) or type(data) is not np.ndarray:
        in_stride = _contiguous_strides(tuple(input.shape))
        in_offset, storage_size = 0, int(np.prod(input.shape, dtype=np.int64))
    else:
        root = _storage(data)
        in_stride = tuple(s // data.itemsize for s in data.strides)
        in_offset, storage_size = _offset(data, root), root.nbytes // data.itemsize
    offset = in_offset if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise ValueError(f"as_strided: storage offset must be non-negative, got {offset}")
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if needed > storage_size:
        raise ShapeError(f"as_strided: sizes {list(size)}, strides {list(stride)} and storage offset {offset} need "
                         f"a storage of {needed} elements; {tuple(input.shape)}'s storage has {storage_size}")
    geometry = (tuple(input.shape), in_stride, in_offset, storage_size)
    return apply(_as_strided_op, input, size=size, stride=stride, storage_offset=offset, geometry=geometry)


def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


__all__ = ["as_strided"]
