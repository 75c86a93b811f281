"""`ember.numpy.ndarray`: what `ember.numpy` returns, a Tensor with NumPy's semantics where they differ from PyTorch's.

Operators and methods follow NumPy: promotion (`1 - mask` is an int64 array, int / int is float64, a
Python float makes an integer array float64), NumPy's method signatures (`x.sum(axis=0, keepdims=True)`,
`x.max(1)` is an array, `x.reshape(2, 3)`, `x.T` reverses every axis, `x.size` is the element count),
NumPy's printing, and augmented assignment as in NumPy and HIPS autograd: `+=` writes in place into an
array, but rebinds a 0-d result (NumPy returns immutable scalars from reductions) and a value being
differentiated (autograd's boxes are immutable), so it never aliases back into a saved value.
"""

from __future__ import annotations

import numpy as np

from ember.tensor import Tensor

_API = None


def _np():
    """The ember.numpy module (imported on first use: it imports this one)."""
    global _API
    if _API is None:
        import ember.numpy as api

        _API = api
    return _API


def adopt(t: Tensor) -> Tensor:
    """Make a freshly computed Tensor an ndarray, in place (same object, autograd history kept)."""
    if type(t) is Tensor:
        t.__class__ = ndarray
    return t


def _numpy_index(index):
    """An index with NumPy's meaning for integer arrays of any width: positions (as int64), where a Tensor index of
    uint8 is a mask (PyTorch's rule) and of int8/int16 is refused."""
    items = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(i, Tensor) and i._data.dtype.kind in "iu" and i._data.dtype.itemsize < 4 for i in items):
        return index
    fixed = tuple(i.long() if isinstance(i, Tensor) and i._data.dtype.kind in "iu" else i for i in items)
    return fixed if isinstance(index, tuple) else fixed[0]


def _axis(axis, kw: dict):
    """NumPy's axis/keepdims, also accepting PyTorch's dim/keepdim (for code written against Tensor)."""
    dim = kw.pop("dim", None)
    keepdim = kw.pop("keepdim", None)
    if kw:
        raise TypeError(f"unexpected keyword arguments {sorted(kw)}")
    return (dim if axis is None else axis), keepdim


class ndarray(Tensor):  # noqa: N801 - NumPy's name
    """A Tensor with NumPy's operators, methods and printing (see the module docstring)."""

    __module__ = "ember.numpy"
    __slots__ = ()
    __hash__ = Tensor.__hash__

    # --- arithmetic and comparisons: ember.numpy's functions, which promote as NumPy does -----------------
    def __add__(self, other):
        return _np().add(self, other)

    def __radd__(self, other):
        return _np().add(other, self)

    def __sub__(self, other):
        return _np().subtract(self, other)

    def __rsub__(self, other):
        return _np().subtract(other, self)

    def __mul__(self, other):
        return _np().multiply(self, other)

    def __rmul__(self, other):
        return _np().multiply(other, self)

    def __truediv__(self, other):
        return _np().divide(self, other)

    def __rtruediv__(self, other):
        return _np().divide(other, self)

    def __floordiv__(self, other):
        return _np().floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _np().floor_divide(other, self)

    def __mod__(self, other):
        return _np().mod(self, other)

    def __rmod__(self, other):
        return _np().mod(other, self)

    def __pow__(self, other):
        return _np().power(self, other)

    def __rpow__(self, other):
        return _np().power(other, self)

    def __matmul__(self, other):
        return _np().matmul(self, other)

    def __rmatmul__(self, other):
        return _np().matmul(other, self)

    def __neg__(self):
        return _np().negative(self)

    def __abs__(self):
        return _np().abs(self)

    def __eq__(self, other):
        return _np().equal(self, other)

    def __ne__(self, other):
        return _np().not_equal(self, other)

    def __lt__(self, other):
        return _np().less(self, other)

    def __le__(self, other):
        return _np().less_equal(self, other)

    def __gt__(self, other):
        return _np().greater(self, other)

    def __ge__(self, other):
        return _np().greater_equal(self, other)

    def __and__(self, other):
        return adopt(Tensor.__and__(self, other))

    def __or__(self, other):
        return adopt(Tensor.__or__(self, other))

    def __xor__(self, other):
        return adopt(Tensor.__xor__(self, other))

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __invert__(self):
        return adopt(Tensor.__invert__(self))

    # --- augmented assignment ---------------------------------------------------------------------------------
    def _augmented(self, result, name: str):
        if self.ndim == 0 or self.requires_grad:
            return result  # rebinds: a NumPy scalar, or a value being differentiated, is immutable
        return self._assign_result(name, result)  # writes in place, as NumPy does for arrays

    def __iadd__(self, other):
        return self._augmented(self + other, "+=")

    def __isub__(self, other):
        return self._augmented(self - other, "-=")

    def __imul__(self, other):
        return self._augmented(self * other, "*=")

    def __itruediv__(self, other):
        return self._augmented(self / other, "/=")

    def __ifloordiv__(self, other):
        return self._augmented(self // other, "//=")

    def __imod__(self, other):
        return self._augmented(self % other, "%=")

    def __ipow__(self, other):
        return self._augmented(self**other, "**=")

    def __imatmul__(self, other):
        return self._augmented(self @ other, "@=")

    # --- indexing ---------------------------------------------------------------------------------------------
    def __getitem__(self, index):
        return adopt(Tensor.__getitem__(self, _numpy_index(index)))

    def __setitem__(self, index, value):
        Tensor.__setitem__(self, _numpy_index(index), value)

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    # --- NumPy's attributes and methods -----------------------------------------------------------------------
    @property
    def size(self) -> int:  # NumPy's: the number of elements
        return self.numel()

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return _np().transpose(self)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        """`ember.numpy.sum(self, ...)`."""
        axis, keepdim = _axis(axis, kw)
        return _np().sum(self, axis, dtype, out, keepdims if keepdim is None else keepdim)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        """`ember.numpy.mean(self, ...)`."""
        axis, keepdim = _axis(axis, kw)
        return _np().mean(self, axis, dtype, out, keepdims if keepdim is None else keepdim)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        """`ember.numpy.prod(self, ...)`."""
        axis, keepdim = _axis(axis, kw)
        return _np().prod(self, axis, dtype, out, keepdims if keepdim is None else keepdim)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        """`ember.numpy.max(self, ...)`: an array, not (values, indices)."""
        axis, keepdim = _axis(axis, kw)
        return _np().max(self, axis, out, keepdims if keepdim is None else keepdim)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        """`ember.numpy.min(self, ...)`: an array, not (values, indices)."""
        axis, keepdim = _axis(axis, kw)
        return _np().min(self, axis, out, keepdims if keepdim is None else keepdim)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        """`ember.numpy.std(self, ...)` (ddof=0 by default, as NumPy)."""
        axis, keepdim = _axis(axis, kw)
        return _np().std(self, axis, dtype, out, ddof, keepdims if keepdim is None else keepdim)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        """`ember.numpy.var(self, ...)` (ddof=0 by default, as NumPy)."""
        axis, keepdim = _axis(axis, kw)
        return _np().var(self, axis, dtype, out, ddof, keepdims if keepdim is None else keepdim)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        """`ember.numpy.all(self, ...)`."""
        axis, keepdim = _axis(axis, kw)
        return _np().all(self, axis, out, keepdims if keepdim is None else keepdim)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        """`ember.numpy.any(self, ...)`."""
        axis, keepdim = _axis(axis, kw)
        return _np().any(self, axis, out, keepdims if keepdim is None else keepdim)

    def argmax(self, axis=None, out=None, **kw):
        """`ember.numpy.argmax(self, ...)`."""
        axis, _ = _axis(axis, kw)
        return _np().argmax(self, axis, out)

    def argmin(self, axis=None, out=None, **kw):
        """`ember.numpy.argmin(self, ...)`."""
        axis, _ = _axis(axis, kw)
        return _np().argmin(self, axis, out)

    def cumsum(self, axis=None, dtype=None, out=None, **kw):
        """`ember.numpy.cumsum(self, ...)`."""
        axis, _ = _axis(axis, kw)
        return _np().cumsum(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None, **kw):
        """`ember.numpy.cumprod(self, ...)`."""
        axis, _ = _axis(axis, kw)
        return _np().cumprod(self, axis, dtype, out)

    def dot(self, b):
        """`ember.numpy.dot(self, b)`."""
        return _np().dot(self, b)

    def reshape(self, *shape, order: str = "C"):
        """This array with a new shape: x.reshape(2, 3) or x.reshape((2, 3))."""
        return _np().reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def transpose(self, *axes):
        """Axes reversed, or permuted: x.transpose(1, 0, 2) or x.transpose((1, 0, 2))."""
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return _np().transpose(self, axes or None)

    def swapaxes(self, axis1: int, axis2: int):
        """`ember.numpy.swapaxes(self, ...)`."""
        return _np().swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None, **kw):
        """`ember.numpy.squeeze(self, axis)`."""
        axis, _ = _axis(axis, kw)
        return _np().squeeze(self, axis)

    def flatten(self, order: str = "C"):
        """A 1-D copy (NumPy's flatten, not PyTorch's)."""
        return _np().ravel(self).copy()

    def ravel(self, order: str = "C"):
        """`ember.numpy.ravel(self)`."""
        return _np().ravel(self)

    def astype(self, dtype):
        """A copy of this array in `dtype`."""
        return adopt(Tensor.astype(self, dtype))

    def copy(self):
        """A copy of this array (differentiable)."""
        return _np().copy(self)

    def clip(self, min=None, max=None):  # noqa: A002 - NumPy's names
        """`ember.numpy.clip(self, min, max)`."""
        return _np().clip(self, min, max)

    def round(self, decimals: int = 0):
        """`ember.numpy.round(self, decimals)`."""
        return _np().round(self, decimals)

    def repeat(self, repeats, axis=None):
        """NumPy's repeat: each element `repeats` times (PyTorch's repeat is NumPy's tile)."""
        return _np().repeat(self, repeats, axis)

    def trace(self, offset: int = 0):
        """`ember.numpy.trace(self, offset)`."""
        return _np().trace(self, offset)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        """`ember.numpy.diagonal(self, ...)`."""
        return _np().diagonal(self, offset, axis1, axis2)

    def nonzero(self):
        """A tuple of index arrays, one per axis (NumPy's nonzero)."""
        return _np().nonzero(self)

    def argsort(self, axis: int | None = -1):
        """`ember.numpy.argsort(self, axis)`."""
        return _np().argsort(self, axis)

    def fill(self, value) -> None:
        """Set every element to `value`, in place."""
        self.fill_(value)

    # --- printing: NumPy's ------------------------------------------------------------------------------------
    def _host_value(self):
        arr = np.asarray(self._device.backend.to_host(self._require_data("repr")))
        return arr[()] if arr.ndim == 0 else arr

    def __repr__(self) -> str:
        if self._data.__class__ is not np.ndarray and getattr(self._data, "symbolic", False):
            return Tensor.__repr__(self)
        return repr(self._host_value())

    def __str__(self) -> str:
        if self._data.__class__ is not np.ndarray and getattr(self._data, "symbolic", False):
            return Tensor.__repr__(self)
        return str(self._host_value())

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return Tensor.__format__(self, spec)
        return format(self._host_value(), spec)
