"""Tensors made like another tensor (same device): zeros_like, ones_like, full_like, ..."""

from __future__ import annotations

import numpy as np

from ember.backends.meta import MetaArray


def _new(like, data):
    from ember.tensor import Tensor

    return Tensor._make(data, like._device)


def _alloc(like, shape, value, np_dtype):
    backend = like._device.backend
    if isinstance(like._data, MetaArray) or backend.abstract:
        return _new(like, MetaArray(shape, np_dtype))
    return _new(like, backend.full(tuple(shape), value, np_dtype))


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of input's shape filled with one value."""
    from ember.dtypes import as_dtype, result_type

    if device is not None and device != input.device:
        return full_like(input.to(device), fill_value, dtype=dtype, requires_grad=requires_grad)
    if dtype is None:
        np_dtype = input._data.dtype
    else:
        np_dtype = as_dtype(dtype).np
    del result_type
    t = _alloc(input, input.shape, fill_value, np_dtype)
    return t.requires_grad_(True) if requires_grad else t


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False):
    """Zeros shaped like input."""
    return full_like(input, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False):
    """Ones shaped like input."""
    return full_like(input, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False):
    """An uninitialised tensor shaped like input (zero-filled here)."""
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like_shape(like, shape):
    """Zeros of `shape` with like's dtype and device (used by gradient rules)."""
    return _alloc(like, tuple(shape), 0, like._data.dtype)


def arange_like(like, values: np.ndarray):
    """An int64 tensor of host `values` on like's device."""
    values = np.asarray(values, dtype=np.int64)
    backend = like._device.backend
    if backend.abstract:
        return _new(like, MetaArray(values.shape, np.int64))
    return _new(like, backend.from_host(values))
