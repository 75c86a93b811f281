"""Tensors made like another tensor (same device): zeros_like, ones_like, full_like, ...

These are ops taking the reference tensor as an input (only its shape, dtype and device are
used), so they work unchanged on meta tensors and inside graphs, where a dimension may only be
known at run time.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply, apply_unary
from ember.op import Op, register
from ember.ops._rules import is_plus_zero, spec


class FullLikeOp(Op):
    """An array of `shape` (default: like's shape) filled with `value`."""

    name = "full_like"
    fresh_output = True
    differentiable = False

    def infer(self, like, value, dtype=None, shape=None):
        return spec(like.shape if shape is None else shape, like.dtype if dtype is None else dtype)

    def kernel(self, xp, like, value, dtype=None, shape=None):
        shape = like.shape if shape is None else shape
        dtype = like.dtype if dtype is None else dtype
        if xp is np and is_plus_zero(value):
            return np.zeros(shape, dtype)  # C, where np.full is Python around empty and copyto (1.5 us more)
        return xp.full(shape, value, dtype=dtype)


_full_like_op = register(FullLikeOp())


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of input's shape filled with one value."""
    from ember.dtypes import as_dtype

    if device is not None and device != input.device:
        return full_like(input.to(device), fill_value, dtype=dtype, requires_grad=requires_grad)
    np_dtype = None if dtype is None else as_dtype(dtype).np
    t = apply_unary(_full_like_op, input, value=fill_value, dtype=np_dtype)
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
    return apply(_full_like_op, like, value=0, shape=tuple(shape))


class ArangeLikeOp(Op):
    """A fixed int64 array (index lists built on the host) on like's device."""

    name = "host_constant"
    fresh_output = True
    differentiable = False

    def infer(self, like, values):
        return spec(values.shape, values.dtype)

    def kernel(self, xp, like, values):
        return xp.asarray(values)


_host_constant_op = register(ArangeLikeOp())


def arange_like(like, values: np.ndarray):
    """An int64 tensor of host `values` on like's device."""
    return apply(_host_constant_op, like, values=np.asarray(values, dtype=np.int64))


def eye_like(like, n: int):
    """An (n, n) identity matrix with like's dtype, on like's device (used by gradient rules)."""
    return apply(_host_constant_op, like, values=np.eye(n, dtype=like._data.dtype))
