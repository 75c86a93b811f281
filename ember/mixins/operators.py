"""Tensor's operators and conversions: arithmetic and comparison operators, indexing, `to`/`cpu`/`float`/...,
`.T`, and the DLPack protocol (each runs an op)."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember import ops
from ember.device import Device, as_device
from ember.dispatch import binary_path as _binary_path
from ember.errors import fmt_shape
from ember.op import OPS
from ember.ops.indexing import _BASIC_TYPES as _BASIC_INDEX
from ember.ops.indexing import _getitem_path
from ember.tensor import Tensor

# the operators skip add/sub/div's alpha and rounding-mode handling
_ADD, _SUB, _MUL, _DIV = OPS["add"], OPS["sub"], OPS["mul"], OPS["div"]
_MATMUL = OPS["matmul"]


class OperatorsMixin:
    """Operators and conversions of `ember.Tensor`."""

    __slots__ = ()

    # --- devices and dtypes --------------------------------------------------------
    def to(self, *args, **kwargs) -> Tensor:
        """Move and/or cast: to(device), to(dtype), to(device, dtype), to(other_tensor)."""
        device, dtype, copy = _parse_to_args(self, args, kwargs)
        out = self
        if dtype is not None and dtype.np != self._data.dtype:
            out = ops.cast(out, dtype)
        if device is not None and device is not self._device:
            out = ops.to_device(out, device)
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        """This tensor on the cpu device."""
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        """This tensor on a CUDA device."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def type(self, dtype=None, non_blocking: bool = False):
        """The type name ('ember.FloatTensor'), or a cast to `dtype` (a dtype, a typed class or such a name)."""
        from ember import typed_tensors

        if dtype is None:
            return typed_tensors.type_name(self)
        return self.to(typed_tensors.dtype_of_type(dtype))

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def half(self) -> Tensor:
        return self.to(dt.float16)

    def bfloat16(self) -> Tensor:
        if dt.bfloat16 is None:
            raise TypeError("bfloat16 needs the ml_dtypes package: pip install ml_dtypes")
        return self.to(dt.bfloat16)

    def long(self) -> Tensor:
        return self.to(dt.int64)

    def int(self) -> Tensor:
        return self.to(dt.int32)

    def short(self) -> Tensor:
        return self.to(dt.int16)

    def byte(self) -> Tensor:
        return self.to(dt.uint8)

    def bool(self) -> Tensor:
        return self.to(dt.bool_)

    def astype(self, dtype) -> Tensor:
        """A copy cast to dtype (NumPy's name for `.to(dtype, copy=True)`)."""
        return self.to(dt.as_dtype(dtype), copy=True)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # --- indexing ----------------------------------------------------------------------
    def __getitem__(self, index) -> Tensor:
        if type(index) in _BASIC_INDEX:  # x[1], x[1:3]: the dispatcher's one-tensor path, one call fewer
            return _getitem_path(self, index=(index,))
        return ops.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        ops.setitem(self, index, value)

    # --- operators -------------------------------------------------------------------
    # The arithmetic operators and @ are the ops' fast paths themselves (`ember.dispatch.binary_path`): `a + b` runs
    # in one Python frame; the reflected forms swap the operands.
    __add__ = _binary_path(_ADD)
    __radd__ = _binary_path(_ADD, swapped=True)
    __sub__ = _binary_path(_SUB)
    __rsub__ = _binary_path(_SUB, swapped=True)
    __mul__ = _binary_path(_MUL)
    __rmul__ = _binary_path(_MUL, swapped=True)
    __truediv__ = _binary_path(_DIV)
    __rtruediv__ = _binary_path(_DIV, swapped=True)

    def __floordiv__(self, other):
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return ops.floor_divide(other, self)

    def __mod__(self, other):
        return ops.remainder(self, other)

    def __rmod__(self, other):
        return ops.remainder(other, self)

    def __pow__(self, other):
        return ops.pow(self, other)

    def __rpow__(self, other):
        return ops.pow(other, self)

    __matmul__ = _binary_path(_MATMUL)
    __rmatmul__ = _binary_path(_MATMUL, swapped=True)

    def __neg__(self):
        return ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return ops.abs(self)

    def __invert__(self):
        return ops.logical_not(self) if self._data.dtype == np.bool_ else ops.bitwise_not(self)

    def __and__(self, other):
        return ops.logical_and(self, other) if self._data.dtype == np.bool_ else ops.bitwise_and(self, other)

    def __or__(self, other):
        return ops.logical_or(self, other) if self._data.dtype == np.bool_ else ops.bitwise_or(self, other)

    def __xor__(self, other):
        return ops.logical_xor(self, other) if self._data.dtype == np.bool_ else ops.bitwise_xor(self, other)

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __eq__(self, other):
        return ops.eq(self, other)

    def __ne__(self, other):
        return ops.ne(self, other)

    def __lt__(self, other):
        return ops.lt(self, other)

    def __le__(self, other):
        return ops.le(self, other)

    def __gt__(self, other):
        return ops.gt(self, other)

    def __ge__(self, other):
        return ops.ge(self, other)

    @property
    def T(self) -> Tensor:
        if self.ndim > 2:
            return ops.permute(self, tuple(reversed(range(self.ndim))))
        return ops.t(self) if self.ndim == 2 else self

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"mT: tensor must have at least 2 dimensions, got shape {fmt_shape(self.shape)}")
        return ops.transpose(self, -2, -1)
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this tensor's memory (the Array API 2023.12 protocol; ember.dlpack)."""
        from ember.dlpack import export

        return export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple:
        """(DLPack device type, index): (1, 0) on the CPU, (2, N) on cuda:N."""
        from ember.dlpack import dlpack_device

        return dlpack_device(self)



def _parse_to_args(t, args, kwargs):
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a._device, a.dtype
        elif isinstance(a, (str, Device)):
            device = a
        elif a is not None:
            dtype = a
    return (
        None if device is None else as_device(device),
        None if dtype is None else dt.as_dtype(dtype),
        copy,
    )
