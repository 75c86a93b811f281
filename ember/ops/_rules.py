"""Shared pieces of shape/dtype rules: broadcasting, dims, promotion on NumPy dtypes."""

from __future__ import annotations

import math

import numpy as np

from ember import dtypes as dt
from ember.backends.meta import MetaArray as Spec
from ember.dtypes import FLOAT_NP  # noqa: F401 - every op's float test, named here with the other rules
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.size import norm_dim, norm_dims  # noqa: F401 - the ops' dim rules, named here with the other rules

_FLOAT_KINDS = frozenset("fV")  # V: ml_dtypes' bfloat16 reports kind 'V'

BOOL_NP = np.dtype(np.bool_)
INT64_NP = np.dtype(np.int64)
# The dtypes NumPy computes in natively: the direct and compiled kernels' fast paths take these.
SINGLE_DOUBLE_NP = (np.dtype(np.float32), np.dtype(np.float64))


def is_float(np_dtype) -> bool:
    """Whether a NumPy dtype is one of Ember's floating types."""
    return np_dtype in FLOAT_NP


def require_float(op: str, dtype, what: str = "input") -> None:
    """Refuse a dtype other than floating point where the op is defined on floating point only, as PyTorch does
    ("not implemented for 'Long'"), rather than compute in the integer dtype and truncate."""
    if np.dtype(dtype) not in FLOAT_NP:
        raise DtypeError(f"{op}: {what} must be floating point, got {np.dtype(dtype).name}")


def refuse_bool(op: str, *values) -> None:
    """Refuse bool tensors where PyTorch has no bool kernel (matrix products, convolution, max pooling); `values`
    are tensors, or the arrays and specs a kernel or shape rule sees (NumPy dtypes)."""
    for v in values:
        dtype = getattr(v, "dtype", None)
        if dtype is dt.bool_ or (isinstance(dtype, np.dtype) and dtype.kind == "b"):
            raise DtypeError(f"{op}: not defined for bool tensors")


def refuse_mixed(op: str, names, *values) -> None:
    """Refuse operands of different dtypes where PyTorch computes in one dtype and raises on a mix (matrix
    products, convolution, a layer's weight and bias) rather than promote; `names` name `values` (tensors, or the
    arrays and specs a kernel or shape rule sees), and a None value is an absent optional operand."""
    first = None
    for v in values:
        if v is not None:
            dtype = v.dtype
            if first is None:
                first = dtype
            elif dtype is not first and dtype != first:
                break
    else:
        return
    got = ", ".join(f"{name} {v.dtype.name} {fmt_shape(tuple(v.shape))}"
                    for name, v in zip(names, values) if v is not None)
    raise DtypeError(f"{op}: expected operands of one dtype, got {got}")


def is_plus_zero(v) -> bool:
    """Whether a Python number is 0 or +0.0 (not -0.0, not False)."""
    return type(v) in (int, float) and v == 0 and math.copysign(1.0, v) > 0


def default_float():
    """The NumPy dtype of the default float type."""
    return dt.get_default_dtype().np


def broadcast_shapes(op: str, *shapes) -> tuple:
    """NumPy/PyTorch broadcasting of shapes; None is an unknown dimension."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) < -axis:
                continue
            d = s[axis]
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d is None:
                continue
            elif size is None:
                size = d
            elif d != size:
                raise ShapeError(
                    f"{op}: shapes {' and '.join(fmt_shape(x) for x in shapes)} cannot be broadcast "
                    f"together (dimension {axis + ndim}: {size} vs {d})"
                )
        out.append(size)
    return tuple(out)


_RESULT_CACHE: dict = {}


def _operand_key(x):
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return type(x)
    return (dtype, len(x.shape) > 0)


def binary_dtype(a, b):
    """PyTorch's result dtype (as a NumPy dtype) for an op on arrays/specs/Python scalars."""
    key = (_operand_key(a), _operand_key(b), dt._default_float)
    r = _RESULT_CACHE.get(key)
    if r is None:
        ops = []
        for k, x in zip(key[:2], (a, b)):
            if isinstance(k, tuple):
                ops.append((dt.from_numpy_dtype(k[0]), 1 if k[1] else 0))
            else:
                ops.append(x if isinstance(x, (bool, int, float)) else float(x))
        r = _RESULT_CACHE[key] = dt.result_type(*ops).np
    return r


def result_dtype(*xs):
    """binary_dtype generalised to any number of operands."""
    ops = []
    for x in xs:
        dtype = getattr(x, "dtype", None)
        if dtype is None:
            ops.append(x)
        else:
            ops.append((dt.from_numpy_dtype(dtype), len(x.shape)))
    return dt.result_type(*ops).np


def float_of(np_dtype):
    """The dtype a float-only op computes in: the input's if floating, else the default float."""
    return np_dtype if np_dtype in FLOAT_NP else default_float()


def channel_shape(ndim: int, channels: int) -> tuple:
    """(1, C, 1, ...): a per-channel (C,) array reshaped to broadcast over an (N, C, ...) input."""
    return (1, channels) + (1,) * (ndim - 2)


def spec(shape, dtype) -> Spec:
    """An output spec."""
    return Spec(shape, dtype)


def shape_of(x) -> tuple:
    """The shape of an array/spec, () for a Python scalar."""
    return tuple(getattr(x, "shape", ()))
