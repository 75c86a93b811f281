"""The meta backend: shapes and dtypes only, no memory; every op runs just its shape rule."""

from __future__ import annotations

import math

import numpy as np

from ember.backends.base import Backend


class MetaArray:
    """Stands in for an array on the meta device: a shape and a dtype, nothing more."""

    __slots__ = ("shape", "dtype")
    symbolic = False  # True for graph values (ember.graph.ir.Value)

    def __init__(self, shape: tuple, dtype) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


class MetaBackend(Backend):
    """Holds no data: allocation makes a MetaArray, copies keep only shape and dtype."""

    abstract = True

    def from_host(self, array) -> MetaArray:
        return MetaArray(np.shape(array), array.dtype)

    def to_host(self, array):
        raise NotImplementedError("meta tensors have no data to copy to the host")

    def empty(self, shape, np_dtype) -> MetaArray:
        return MetaArray(shape, np_dtype)

    def full(self, shape, value, np_dtype) -> MetaArray:
        return MetaArray(shape, np_dtype)


def is_symbolic(x) -> bool:
    """Whether x (a tensor, its data, or any value) is a value of a graph being built: the one test."""
    data = getattr(x, "_data", x)
    return type(data) is not np.ndarray and getattr(data, "symbolic", False) is True
