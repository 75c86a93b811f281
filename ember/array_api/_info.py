"""`__array_namespace_info__`: the namespace's capabilities, devices and default dtypes."""

from __future__ import annotations

from ember import cuda, dtypes
from ember.array_api import _dtypes as d
from ember.device import Device


class Info:
    """What this namespace supports (the standard's inspection API)."""

    def capabilities(self):
        """Boolean indexing and data-dependent shapes are supported; max dimensions are unbounded."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self):
        """The device arrays are created on when none is given."""
        return Device("cpu")

    def devices(self):
        """The devices this process can use."""
        out = [Device("cpu")]
        if cuda.is_available():
            out += [Device(f"cuda:{i}") for i in range(cuda.device_count())]
        return out

    def default_dtypes(self, *, device=None):
        """The default dtypes of Python floats and ints, and of indices."""
        return {"real floating": dtypes.get_default_dtype(), "complex floating": None, "integral": d.int64,
                "indexing": d.int64}

    def dtypes(self, *, device=None, kind=None):
        """The standard's dtypes Ember has, by name (optionally of one kind)."""
        out = {}
        for dtype in d.DTYPES:
            if kind is None or d.isdtype(dtype, kind):
                out[dtype.name] = dtype
        return out


def __array_namespace_info__() -> Info:
    """The inspection object for this namespace."""
    return Info()
