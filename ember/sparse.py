"""Sparse COO tensors and `sparse.mm`, with PyTorch's semantics (torch.sparse_coo_tensor, torch.sparse.mm).

A `SparseCOOTensor` is two dense tensors and a shape: `indices`, an int64 (sparse_dim, nnz) tensor
of coordinates, and `values`, (nnz, *dense_dims), one entry (or dense block) per coordinate. As in
PyTorch a coordinate may repeat (the tensor is then "uncoalesced": its entries add up), and
`coalesce()` sorts the coordinates and sums repeats. Every operation is written with dense Ember
ops on `values`, so gradients reach `values` (and the dense operand of `mm`) through the ordinary
autograd, to any order. It is a class of its own, not a layout flag on `Tensor`.
"""

from __future__ import annotations

import numpy as np

from ember import creation, dispatch
from ember import dtypes as dt
from ember.errors import DataDependentError, DeviceMismatchError, ShapeError, fmt_shape
from ember.layout import sparse_coo
from ember.ops.opmath import upcast_tensor
from ember.tensor import Tensor


class SparseCOOTensor:
    """A sparse tensor in coordinate format: int64 `indices` (sparse_dim, nnz) and `values` (nnz, *dense_dims)."""

    is_sparse = True
    layout = sparse_coo  # torch.sparse_coo

    def __init__(self, indices: Tensor, values: Tensor, size: tuple, *, coalesced: bool = False) -> None:
        # Use sparse_coo_tensor() to build one: it checks the arguments; this only stores them.
        self._idx = indices
        self._vals = values
        self._shape = tuple(int(s) for s in size)
        self._coalesced = bool(coalesced)

    # --- attributes -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    def size(self, dim: int | None = None):
        """The shape, or one dimension of it."""
        return self._shape if dim is None else self._shape[dim]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        """Number of dimensions (sparse and dense)."""
        return len(self._shape)

    @property
    def dtype(self):
        return self._vals.dtype

    @property
    def device(self):
        return self._vals.device

    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> SparseCOOTensor:
        """Make the values a leaf that collects gradients (in place), as PyTorch does."""
        self._vals.requires_grad_(requires_grad)
        return self

    def sparse_dim(self) -> int:
        """How many leading dimensions are sparse (the rows of `indices`)."""
        return int(self._idx.shape[0])

    def dense_dim(self) -> int:
        """How many trailing dimensions each value holds densely."""
        return self._vals.ndim - 1

    def _nnz(self) -> int:
        """Number of stored entries (repeats included while uncoalesced)."""
        return int(self._idx.shape[1])

    def is_coalesced(self) -> bool:
        """Whether the coordinates are sorted and unique."""
        return self._coalesced

    def indices(self) -> Tensor:
        """The coordinates of a coalesced tensor (PyTorch refuses them on an uncoalesced one too)."""
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        """The values of a coalesced tensor (differentiable)."""
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._vals

    def _indices(self) -> Tensor:
        """The stored coordinates, coalesced or not."""
        return self._idx

    def _values(self) -> Tensor:
        """The stored values, coalesced or not."""
        return self._vals

    # --- conversions ------------------------------------------------------------------------------
    def coalesce(self) -> SparseCOOTensor:
        """The same tensor with sorted, unique coordinates (repeated ones summed; differentiable in the values)."""
        if self._coalesced:
            return self
        idx = dispatch.read(self._idx, "coalesce")
        idx = self._idx._device.backend.to_host(idx).astype(np.int64)  # the coordinates are sorted on the host
        sparse_shape = self._shape[: self.sparse_dim()]
        if idx.shape[1] == 0:
            return SparseCOOTensor(self._idx, self._vals, self._shape, coalesced=True)
        linear = np.ravel_multi_index(tuple(idx), sparse_shape)
        unique, inverse = np.unique(linear, return_inverse=True)
        new_idx = np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64).reshape(len(sparse_shape), -1)
        dev = self._vals.device
        zeros = creation.zeros(len(unique), *self._vals.shape[1:], dtype=self.dtype, device=dev)
        vals = zeros.index_add(0, creation.tensor(inverse.reshape(-1), device=dev), self._vals)
        return SparseCOOTensor(creation.tensor(new_idx, device=dev), vals, self._shape, coalesced=True)

    def to_dense(self) -> Tensor:
        """The dense tensor (repeated coordinates add up); gradients flow back to the values."""
        zeros = creation.zeros(*self._shape, dtype=self.dtype, device=self.device)
        coords = tuple(self._idx[k] for k in range(self.sparse_dim()))
        return zeros.index_put(coords, self._vals, accumulate=True)

    def t(self) -> SparseCOOTensor:
        """The transpose of a 2-D sparse tensor (coordinates swapped)."""
        if self.sparse_dim() != 2 or self.dense_dim() != 0:
            raise RuntimeError(f"t(): expected a 2-D sparse tensor with scalar values, got shape {fmt_shape(self._shape)}")
        return SparseCOOTensor(self._idx.flip(0), self._vals, self._shape[::-1])

    def to(self, device) -> SparseCOOTensor:
        """The same tensor on another device."""
        return SparseCOOTensor(self._idx.to(device), self._vals.to(device), self._shape, coalesced=self._coalesced)

    def detach(self) -> SparseCOOTensor:
        """The same coordinates and values, cut from the autograd graph."""
        return SparseCOOTensor(self._idx, self._vals.detach(), self._shape, coalesced=self._coalesced)

    def __matmul__(self, other):
        return mm(self, other)

    def __repr__(self) -> str:
        return (f"tensor(indices={self._idx!r},\n       values={self._vals!r},\n       size={self._shape}, "
                f"nnz={self._nnz()}, layout=sparse_coo)")


def _as_tensor(x, dtype=None, device=None) -> Tensor:
    if isinstance(x, Tensor):
        return x if dtype is None and device is None else x.to(device=device or x.device, dtype=dtype or x.dtype)
    return creation.tensor(x, dtype=dtype, device=device)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad: bool = False,
                      is_coalesced: bool | None = None) -> SparseCOOTensor:
    """A sparse COO tensor from coordinates (sparse_dim, nnz) and values (nnz, *dense_dims).

    Without `size` the shape is the smallest that holds every coordinate. Coordinates out of range
    are an error (PyTorch checks them only when asked; a wrong coordinate here would corrupt results
    silently). Repeated coordinates are kept until `coalesce()`.
    """
    values = _as_tensor(values, dtype, device)
    indices = _as_tensor(indices, device=values.device)
    if indices.dtype.is_floating_point or indices.dtype.name == "bool":
        raise TypeError(f"sparse_coo_tensor: indices must be an int64 tensor, got {indices.dtype.name}")
    indices = indices.to(dtype=dt.int64)
    if indices.ndim != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be 2-D (sparse_dim, nnz), got shape {fmt_shape(indices.shape)}")
    if values.ndim < 1:
        raise ShapeError("sparse_coo_tensor: values must have at least one dimension (nnz, *dense_dims)")
    nnz = indices.shape[1]
    if values.shape[0] != nnz:
        raise ShapeError(f"sparse_coo_tensor: indices and values must have same nnz, but got nnz from indices: "
                         f"{nnz}, nnz from values: {values.shape[0]}")
    sparse_dim = indices.shape[0]
    on_meta = values.device.type == "meta"
    coords = None if on_meta else dispatch.read(indices, "sparse_coo_tensor")
    if coords is not None and coords.size and int(coords.min()) < 0:
        k = int(np.argwhere(coords < 0)[0][0])
        raise ValueError(f"sparse_coo_tensor: found negative index {int(coords[k].min())} for dim {k}")
    if size is None:
        if coords is None:
            raise DataDependentError("sparse_coo_tensor: without size the shape depends on the indices' values")
        size = tuple(int(coords[k].max()) + 1 if nnz else 0 for k in range(sparse_dim)) + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + values.ndim - 1:
        raise ShapeError(f"sparse_coo_tensor: number of dimensions must be sparse_dim ({sparse_dim}) + dense_dim "
                         f"({values.ndim - 1}), but got {len(size)}")
    if tuple(size[sparse_dim:]) != tuple(values.shape[1:]):
        raise ShapeError(f"sparse_coo_tensor: values have dense shape {fmt_shape(values.shape[1:])}, but size "
                         f"{fmt_shape(size)} has {fmt_shape(size[sparse_dim:])} after its {sparse_dim} sparse dims")
    if coords is not None and nnz:
        for k in range(sparse_dim):
            top = int(coords[k].max())
            if top >= size[k]:
                raise ValueError(f"sparse_coo_tensor: size is inconsistent with indices: for dim {k}, size is "
                                 f"{size[k]} but found index {top}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseCOOTensor(indices, values, size, coalesced=bool(is_coalesced) or nnz <= 1)


def mm(sparse: SparseCOOTensor, dense: Tensor) -> Tensor:
    """sparse (n, m) @ dense (m, p) -> dense (n, p); gradients reach `dense` and the sparse tensor's values."""
    if not isinstance(sparse, SparseCOOTensor):
        raise TypeError(f"sparse.mm: the first argument must be a sparse COO tensor, got {type(sparse).__name__}")
    if isinstance(dense, SparseCOOTensor):
        raise NotImplementedError("sparse.mm: sparse @ sparse is not supported; give the second operand dense")
    if sparse.sparse_dim() != 2 or sparse.dense_dim() != 0:
        raise ShapeError(f"sparse.mm: expected a 2-D sparse matrix with scalar values, got shape "
                         f"{fmt_shape(sparse.shape)} with {sparse.dense_dim()} dense dims")
    if dense.ndim != 2:
        raise ShapeError(f"sparse.mm: expected a 2-D dense matrix, got shape {fmt_shape(dense.shape)}")
    n, m = sparse.shape
    if dense.shape[0] != m:
        raise ShapeError(f"sparse.mm: sparse {fmt_shape(sparse.shape)} and dense {fmt_shape(dense.shape)} shapes "
                         "cannot be multiplied")
    if dense.dtype != sparse.dtype:
        raise TypeError(f"sparse.mm: the sparse values are {sparse.dtype.name} and the dense matrix is "
                        f"{dense.dtype.name}; both must have the same dtype")
    if dense.device != sparse.device:
        raise DeviceMismatchError(f"sparse.mm: the sparse tensor is on {sparse.device} and the dense one on "
                                        f"{dense.device}")
    rows, cols = sparse._idx[0], sparse._idx[1]
    # Each stored entry (r, c, v) adds v * dense[c] to row r: a gather, a scale and a scatter-add,
    # accumulated in float32 for float16/bfloat16 like every other product.
    vals, d = upcast_tensor(sparse._vals), upcast_tensor(dense)
    out = creation.zeros(n, dense.shape[1], dtype=d.dtype, device=d.device)
    out = out.index_add(0, rows, vals.unsqueeze(1) * d.index_select(0, cols))
    return out if out.dtype == dense.dtype else out.to(dense.dtype)


def to_sparse(dense: Tensor) -> SparseCOOTensor:
    """A coalesced sparse COO tensor holding the non-zero entries of a dense tensor."""
    idx = dense.detach().nonzero().t()
    coords = tuple(idx[k] for k in range(dense.ndim))
    return SparseCOOTensor(idx.contiguous(), dense[coords], dense.shape, coalesced=True)


__all__ = ["SparseCOOTensor", "mm", "sparse_coo_tensor", "to_sparse"]
