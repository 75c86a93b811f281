"""The standard's dtypes, type promotion, `astype`, `can_cast`, `finfo`/`iinfo`, `isdtype`, `result_type`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember import dtypes as _dt
from ember.tensor import Tensor

bool = _dt.bool_  # noqa: A001  (the standard's name)
int8, int16, int32, int64, uint8 = _dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8
float32, float64 = _dt.float32, _dt.float64

# The standard's dtypes Ember has (no uint16/32/64 and no complex types); bfloat16/float16 are outside it.
DTYPES = (bool, int8, int16, int32, int64, uint8, float32, float64)
_KINDS = {
    "bool": (bool,),
    "signed integer": (int8, int16, int32, int64),
    "unsigned integer": (uint8,),
    "integral": (int8, int16, int32, int64, uint8),
    "real floating": (float32, float64),
    "complex floating": (),
    "numeric": (int8, int16, int32, int64, uint8, float32, float64),
}


def _check_dtype(fn: str, dtype):
    """An Ember dtype from the standard's set, or a TypeError naming fn."""
    if type(dtype) is not _dt.DType:
        try:
            dtype = _dt.as_dtype(dtype)
        except TypeError:
            raise TypeError(f"array_api.{fn}: {dtype!r} is not a dtype") from None
    return dtype


def isdtype(dtype, kind) -> bool:
    """Whether dtype is of the kind named (a string, a dtype, or a tuple of either)."""
    dtype = _check_dtype("isdtype", dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"array_api.isdtype: unknown kind {kind!r}; known: {sorted(_KINDS)}")
        return dtype in _KINDS[kind]
    return dtype is _check_dtype("isdtype", kind)


def promote(fn: str, a, b):
    """The standard's promotion of two dtypes: only within a kind (bool, integer, floating).

    Mixed kinds are outside the standard; they get PyTorch's answer (int with float -> the float),
    as array-api-compat's torch namespace does.
    """
    if a is b:
        return a
    return _dt.promote_types(a, b)


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion gives for these arrays, dtypes and Python scalars."""
    dtypes, scalars = [], []
    for x in arrays_and_dtypes:
        if isinstance(x, Tensor):
            dtypes.append(x.dtype)
        elif isinstance(x, (int, float, complex)) and not isinstance(x, _dt.DType):
            scalars.append(x)
        else:
            dtypes.append(_check_dtype("result_type", x))
    if not dtypes:
        raise ValueError("array_api.result_type: needs at least one array or dtype")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote("result_type", out, d)
    for s in scalars:  # a Python scalar takes the array's dtype when its kind fits (2024.12)
        if isinstance(s, complex):
            raise TypeError("array_api.result_type: Ember has no complex dtypes")
        if isinstance(s, float) and out.category != _dt.FLOAT:
            out = _dt.get_default_dtype()
        elif type(s) is int and out is bool:
            out = int64
    return out


def can_cast(from_, to, /) -> bool:
    """Whether the standard's promotion rules allow from_ to become to."""
    src = from_.dtype if isinstance(from_, Tensor) else _check_dtype("can_cast", from_)
    dst = _check_dtype("can_cast", to)
    if src is dst:
        return True
    if src.category != dst.category:
        return src is bool  # bool casts up to anything; numbers never down to bool or across kinds
    return promote("can_cast", src, dst) is dst


@dataclass(frozen=True)
class finfo_object:
    """Machine limits of a floating-point dtype (the standard's finfo)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: object


@dataclass(frozen=True)
class iinfo_object:
    """Machine limits of an integer dtype (the standard's iinfo)."""

    bits: int
    max: int
    min: int
    dtype: object


def finfo(type, /) -> finfo_object:  # noqa: A002  (the standard's parameter name)
    """Limits of a floating-point dtype (or an array's dtype)."""
    dtype = type.dtype if isinstance(type, Tensor) else _check_dtype("finfo", type)
    if dtype not in (float32, float64):
        raise TypeError(f"array_api.finfo: expected a real floating dtype, got {dtype}")
    f = np.finfo(dtype.np)
    return finfo_object(f.bits, float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), dtype)


def iinfo(type, /) -> iinfo_object:  # noqa: A002
    """Limits of an integer dtype (or an array's dtype)."""
    dtype = type.dtype if isinstance(type, Tensor) else _check_dtype("iinfo", type)
    if dtype not in _KINDS["integral"]:
        raise TypeError(f"array_api.iinfo: expected an integer dtype, got {dtype}")
    i = np.iinfo(dtype.np)
    return iinfo_object(i.bits, int(i.max), int(i.min), dtype)


def astype(x, dtype, /, *, copy: bool = True, device=None):
    """x cast to dtype (a new array unless copy=False and nothing changes)."""
    dtype = _check_dtype("astype", dtype)
    if device is not None:
        x = x.to_device(device)
    if not copy and x.dtype is dtype:
        return x
    return x.to(dtype, copy=True)
