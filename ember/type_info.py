"""`ember.finfo` and `ember.iinfo`: the numerical limits of a dtype, with PyTorch's attribute names."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt


def _dtype(dtype, default):
    return default if dtype is None else dt.as_dtype(dtype)


class finfo:  # noqa: N801  (PyTorch's and NumPy's name)
    """Limits of a floating dtype: bits, eps, max, min, tiny (= smallest_normal), resolution; the default float
    dtype's when none is given."""

    def __init__(self, type=None):  # noqa: A002  (PyTorch's parameter name)
        d = _dtype(type, dt.get_default_dtype())
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d.name} is not a floating point dtype (use iinfo for integers)")
        if d.name == "bfloat16":
            import ml_dtypes

            info = ml_dtypes.finfo(d.np)
        else:
            info = np.finfo(d.np)
        self.dtype = d.name
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # (ml_dtypes gives bfloat16 the value rounded to bfloat16)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801
    """Limits of an integer dtype: bits, max, min."""

    def __init__(self, type):  # noqa: A002
        d = _dtype(type, None)
        if d.is_floating_point or d.name == "bool":
            raise TypeError(f"iinfo: {d.name} is not an integer dtype" + (" (use finfo)" if d.is_floating_point else ""))
        self.dtype = d.name
        info = np.iinfo(d.np)
        self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
