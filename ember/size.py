"""`ember.Size`: what `Tensor.shape` and `Tensor.size()` return, a tuple of ints with `numel()` (torch.Size)."""

from __future__ import annotations

import operator

import numpy as np

_new = tuple.__new__


class Size(tuple):
    """A tensor's shape: a tuple of dimension lengths that also knows its `numel()` (PyTorch's torch.Size).

    It compares, hashes and unpacks as the plain tuple of its lengths; `+` and `*` give Sizes. A slice
    is a plain tuple (torch.Size gives a Size): indexing stays tuple's own, since `x.shape[0]` is on
    every hot path.
    """

    __slots__ = ()

    def __new__(cls, sizes=()):
        dims = []
        for i, d in enumerate(sizes):
            try:
                dims.append(operator.index(d))
            except TypeError:
                raise TypeError(f"Size() takes an iterable of 'int' (item {i} is '{type(d).__name__}')") from None
        return _new(cls, dims)

    def numel(self) -> int:
        """The number of elements of a tensor of this shape (1 for a 0-d shape)."""
        n = 1
        for d in self:
            n *= d
        return n

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return _new(Size, tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return _new(Size, tuple.__add__(other, self))

    def __mul__(self, n):
        return _new(Size, tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))

    def __repr__(self) -> str:
        return f"ember.Size({list(self)})"

    __str__ = __repr__


_CACHE: dict = {}
_CACHE_LIMIT = 4096  # distinct shapes kept; more (a stream of new sequence lengths, say) start it afresh


def size_of(shape: tuple) -> Size:
    """The Size of a backend array's shape tuple, shared between equal shapes.

    `Tensor.shape` is read on every op's hot path: a lookup of an immutable Size made once per
    distinct shape is about half the cost of building a tuple subclass at each read.
    """
    s = _CACHE.get(shape)
    if s is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        s = _CACHE[shape] = _new(Size, shape)
    return s


def size_as_is(shape) -> Size:
    """A Size of `shape` kept as it is and not shared: graph values' shapes may hold symbolic sizes
    (`ember.symbolic.SymInt`), which a lookup in the cache would compare, and so fix, by value."""
    return _new(Size, tuple(shape))


def norm_dim(op: str, dim: int, ndim: int) -> int:
    """A dim in [-ndim, ndim) made non-negative; an IndexError naming the op otherwise."""
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor of {ndim} dimension(s)")
    return int(dim) % n


def norm_dims(op: str, dim, ndim: int) -> tuple:
    """None (all dims), an int, or a tuple of ints -> sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(norm_dim(op, d, ndim) for d in dim)
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} names a dimension more than once")
        return tuple(sorted(dims)) if ndim else ()
    return (norm_dim(op, dim, ndim),) if ndim else ()
