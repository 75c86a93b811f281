"""PyTorch's typed tensor classes (`ember.FloatTensor`, `ember.LongTensor`, ...): constructors and dtype checks.

`ember.FloatTensor(2, 3)` makes a (zero-filled) 2x3 float32 tensor, `ember.LongTensor([1, 2])` an int64
tensor from data, and `isinstance(x, ember.FloatTensor)` tells whether x is a float32 tensor off CUDA,
as in PyTorch. The classes are not Tensor subclasses: every tensor is an `ember.Tensor`.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.size import Size
from ember.tensor import Tensor

_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8", "CharTensor": "int8", "ShortTensor": "int16", "IntTensor": "int32",
    "LongTensor": "int64", "BoolTensor": "bool",
}


class TensorType(type):
    """The metaclass of the typed tensor classes: calling one makes a tensor, isinstance checks the dtype."""

    dtype: dt.DType

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type != "cuda"

    def __call__(cls, *args, device=None) -> Tensor:
        from ember.creation import tensor, zeros

        if cls.dtype is None:
            raise TypeError(f"{cls.__name__} needs the ml_dtypes package for bfloat16: pip install ml_dtypes")
        if not args:
            return zeros(0, dtype=cls.dtype, device=device)
        if isinstance(args[0], Size) or all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                            for a in args):
            # sizes (PyTorch leaves the memory uninitialised; here it is zero-filled)
            return zeros(*args, dtype=cls.dtype, device=device)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}(): expected sizes as ints, or one sequence of data, got {args!r}")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"{cls.__name__}(): expected a {cls.dtype.name} tensor, got {data.dtype.name}; "
                                f"convert it with .to(ember.{cls.dtype.name})")
            return data
        return tensor(data, dtype=cls.dtype, device=device)

    def __repr__(cls) -> str:
        return f"<class 'ember.{cls.__name__}'>"


def _make(name: str, dtype_name: str) -> TensorType:
    dtype = getattr(dt, "bool_" if dtype_name == "bool" else dtype_name)
    doc = f"A {dtype_name} tensor: `{name}(*sizes)` (zero-filled) or `{name}(data)`; isinstance checks the dtype."
    return TensorType(name, (), {"dtype": dtype, "__doc__": doc, "__module__": "ember"})


FloatTensor = _make("FloatTensor", "float32")
DoubleTensor = _make("DoubleTensor", "float64")
HalfTensor = _make("HalfTensor", "float16")
BFloat16Tensor = _make("BFloat16Tensor", "bfloat16")
ByteTensor = _make("ByteTensor", "uint8")
CharTensor = _make("CharTensor", "int8")
ShortTensor = _make("ShortTensor", "int16")
IntTensor = _make("IntTensor", "int32")
LongTensor = _make("LongTensor", "int64")
BoolTensor = _make("BoolTensor", "bool")

BY_NAME = {name: globals()[name] for name in _DTYPES}


def type_name(t: Tensor) -> str:
    """'ember.FloatTensor' for a float32 tensor ('ember.cuda.FloatTensor' on CUDA), as Tensor.type() reports it."""
    name = next(n for n, d in _DTYPES.items() if BY_NAME[n].dtype is t.dtype)
    return f"ember.cuda.{name}" if t.device.type == "cuda" else f"ember.{name}"


def dtype_of_type(spec) -> dt.DType:
    """The dtype a Tensor.type(...) argument names: a typed class, 'ember.LongTensor' ('torch.' too), or a dtype."""
    if isinstance(spec, TensorType):
        return spec.dtype
    if isinstance(spec, str) and spec.rsplit(".", 1)[-1] in _DTYPES:
        return BY_NAME[spec.rsplit(".", 1)[-1]].dtype
    return dt.as_dtype(spec)
