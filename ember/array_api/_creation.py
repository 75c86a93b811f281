"""Creation functions: arange, asarray, empty/zeros/ones/full (and *_like), eye, linspace, meshgrid, tril/triu."""

from __future__ import annotations

import math

import numpy as np

from ember import creation, dtypes, ops
from ember.array_api._dtypes import _check_dtype
from ember.array_api._helpers import check_array
from ember.device import Device
from ember.dlpack import from_dlpack as _from_dlpack
from ember.dtypes import DType
from ember.tensor import Tensor


def _dtype(fn, dtype):
    return None if dtype is None else _check_dtype(fn, dtype)


def _infer_dtype(obj):
    """The standard's dtype for nested Python scalars: bool, else the default int, else the default float."""
    kinds = set()

    def walk(o):
        if isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, Tensor):
            kinds.add(o.dtype)
        else:
            kinds.add(type(o))

    walk(obj)
    if any(isinstance(k, DType) for k in kinds):
        out = None
        for k in kinds:
            k = k if isinstance(k, DType) else _check_dtype("asarray", k)
            out = k if out is None else dtypes.promote_types(out, k)
        return out
    if complex in kinds:
        raise TypeError("array_api.asarray: Ember has no complex dtypes")
    if not kinds or float in kinds or any(issubclass(k, float) for k in kinds if isinstance(k, type)):
        return dtypes.get_default_dtype()
    if kinds and kinds <= {bool, np.bool_}:
        return dtypes.bool_
    return dtypes.int64


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array, nested sequences of scalars, a scalar or a buffer; copy=False never copies."""
    dtype = _dtype("asarray", dtype)
    if isinstance(obj, Tensor):
        same = (dtype is None or obj.dtype is dtype) and (device is None or Device(device) == obj.device)
        if same and not copy:
            return obj
        if copy is False:
            raise ValueError("array_api.asarray: copy=False, but a dtype or device change needs a copy")
        out = obj.to(dtype or obj.dtype, copy=True)
        return out if device is None else out.to_device(device)
    if isinstance(obj, np.ndarray) or hasattr(obj, "__array_interface__") or hasattr(obj, "__buffer__") \
            or isinstance(obj, (memoryview, bytearray, bytes)):
        arr = np.asarray(obj) if not isinstance(obj, (memoryview, bytearray, bytes)) else np.frombuffer(obj, np.uint8)
        if copy is False and (dtype is not None and arr.dtype != dtype.np or device not in (None, "cpu")):
            raise ValueError("array_api.asarray: copy=False, but a dtype or device change needs a copy")
        if copy is False:
            return creation.from_numpy(arr)
        return creation.tensor(arr.copy() if copy else arr, dtype=dtype, device=device)
    if copy is False:
        raise ValueError("array_api.asarray: copy=False needs an array or a buffer; Python objects are always copied")
    if dtype is None:
        dtype = _infer_dtype(obj)
    if isinstance(obj, (list, tuple)) and _has_tensor(obj):
        obj = _to_host(obj)
    if dtype.category != dtypes.FLOAT:  # a float that does not fit would be silently truncated
        _check_ints(obj, dtype)
    return creation.tensor(np.array(obj, dtype=dtype.np), dtype=dtype, device=device)


def _has_tensor(obj) -> bool:
    return any(isinstance(o, Tensor) or (isinstance(o, (list, tuple)) and _has_tensor(o)) for o in obj)


def _to_host(obj):
    if isinstance(obj, Tensor):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [_to_host(o) for o in obj]
    return obj


def _check_ints(obj, dtype):
    info = np.iinfo(dtype.np) if dtype.category == dtypes.INT else None

    def walk(o):
        if isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif info is not None and isinstance(o, int) and not info.min <= o <= info.max:
            raise OverflowError(f"array_api.asarray: {o} does not fit in {dtype}")

    walk(obj)


def _shape(fn, shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def empty(shape, *, dtype=None, device=None):
    """An uninitialised array."""
    return creation.empty(*_shape("empty", shape), dtype=_dtype("empty", dtype), device=device)


def zeros(shape, *, dtype=None, device=None):
    """An array of zeros."""
    return creation.zeros(*_shape("zeros", shape), dtype=_dtype("zeros", dtype), device=device)


def ones(shape, *, dtype=None, device=None):
    """An array of ones."""
    return creation.ones(*_shape("ones", shape), dtype=_dtype("ones", dtype), device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    """An array filled with fill_value (its dtype from fill_value when dtype is None)."""
    dtype = _dtype("full", dtype) or _infer_dtype([fill_value])
    return creation.full(_shape("full", shape), fill_value, dtype=dtype, device=device)


def _like(fn, factory, x, dtype, device, *args):
    check_array(fn, x)
    dtype = _dtype(fn, dtype) or x.dtype
    return factory(x.shape, *args, dtype=dtype, device=device if device is not None else x.device)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array shaped like x."""
    return _like("empty_like", empty, x, dtype, device)


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros shaped like x."""
    return _like("zeros_like", zeros, x, dtype, device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones shaped like x."""
    return _like("ones_like", ones, x, dtype, device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """fill_value shaped like x (x's dtype unless dtype is given)."""
    return _like("full_like", full, x, dtype, device, fill_value)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in [start, stop); the length is ceil((stop - start) / step)."""
    if stop is None:
        start, stop = 0, start
    dtype = _dtype("arange", dtype)
    if step == 0:
        raise ValueError("array_api.arange: step must not be zero")
    if dtype is None:
        dtype = dtypes.get_default_dtype() if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.int64
    n = max(math.ceil((stop - start) / step), 0)
    # start + i * step computed in the result dtype's NumPy type, so the length is the standard's
    data = (np.arange(n, dtype=np.float64 if dtype.is_floating_point else np.int64) * step + start).astype(dtype.np)
    return creation.tensor(data, dtype=dtype, device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """Ones on the k-th diagonal, zeros elsewhere."""
    dtype = _dtype("eye", dtype) or dtypes.get_default_dtype()
    data = np.eye(n_rows, n_cols, k=k, dtype=dtype.np)
    return creation.tensor(data, dtype=dtype, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """num evenly spaced values from start to stop (stop excluded when endpoint=False)."""
    if isinstance(start, complex) or isinstance(stop, complex):
        raise TypeError("array_api.linspace: Ember has no complex dtypes")
    dtype = _dtype("linspace", dtype) or dtypes.get_default_dtype()
    if endpoint:
        return creation.linspace(start, stop, num, dtype=dtype, device=device)
    data = np.linspace(start, stop, num, endpoint=False, dtype=np.float64).astype(dtype.np)
    return creation.tensor(data, dtype=dtype, device=device)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-d arrays ('xy' swaps the first two axes, as NumPy does)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"array_api.meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        check_array("meshgrid", a)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and len(arrays) >= 2 and i < 2:
            axis = 1 - i
        view = [1] * len(arrays)
        view[axis] = a.shape[0]
        out.append(ops.broadcast_to(ops.reshape(a, tuple(view)), tuple(shape)))
    return out


def tril(x, /, *, k=0):
    """The lower triangle of the last two axes (k shifts the diagonal)."""
    return ops.tril(check_array("tril", x), k)


def triu(x, /, *, k=0):
    """The upper triangle of the last two axes."""
    return ops.triu(check_array("triu", x), k)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array sharing the memory of anything with `__dlpack__` (copy=True copies; device= moves it)."""
    return _from_dlpack(x, device=device, copy=copy)
