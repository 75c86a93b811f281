"""Ember's dtypes and PyTorch's type-promotion rules."""

from __future__ import annotations

import importlib.util

import numpy as np

# bfloat16 exists only when the optional ml_dtypes package is installed; it is imported at the first use of
# bfloat16's NumPy dtype (`bfloat16.np`), since importing it takes half a second that `import ember` should not pay.
_HAS_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None


class DType:
    """A tensor element type: a name, its NumPy dtype and its promotion category."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "category", "_rank")

    def __init__(self, name: str, np_dtype, category: int, rank: int, itemsize: int | None = None) -> None:
        self.name = name
        if np_dtype is not None:  # None: bfloat16, whose NumPy dtype is made at its first use (__getattr__)
            self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize if itemsize is None else itemsize
        self.category = category  # 0 bool, 1 integer, 2 floating
        self.is_floating_point = category == 2
        self.is_signed = name not in ("bool", "uint8")
        self._rank = rank

    def __getattr__(self, attr: str):
        # reached only for a slot not set: bfloat16's NumPy dtype before its first use
        if attr == "np" and self.name == "bfloat16":
            return _load_bfloat16()
        raise AttributeError(f"'DType' object has no attribute {attr!r}")

    # Identity is equality (there is one object per dtype, kept by pickling through get_dtype). Saying so here
    # keeps `dtype == np.dtype(...)` from falling to NumPy's reflected comparison, which tries to convert the
    # DType into a NumPy dtype and fails: 3.4 us for a False.
    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))

    def to_numpy(self) -> np.dtype:
        """The NumPy dtype that stores this type."""
        return self.np


BOOL, INT, FLOAT = 0, 1, 2

bool_ = DType("bool", np.bool_, BOOL, 0)
uint8 = DType("uint8", np.uint8, INT, 1)
int8 = DType("int8", np.int8, INT, 1)
int16 = DType("int16", np.int16, INT, 2)
int32 = DType("int32", np.int32, INT, 3)
int64 = DType("int64", np.int64, INT, 4)
float16 = DType("float16", np.float16, FLOAT, 1)
float32 = DType("float32", np.float32, FLOAT, 3)
float64 = DType("float64", np.float64, FLOAT, 4)
bfloat16 = DType("bfloat16", None, FLOAT, 2, itemsize=2) if _HAS_ML_DTYPES else None

ALL_DTYPES = [d for d in (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64) if d]
FLOAT_DTYPES = [d for d in ALL_DTYPES if d.is_floating_point]
_loaded_hooks: list = []


def when_loaded(hook) -> None:
    """Call hook(dtype) for every Ember dtype whose NumPy dtype exists: now for those that do, and for bfloat16 when
    ml_dtypes is imported (modules keeping tables keyed by NumPy dtypes add its entries this way)."""
    _loaded_hooks.append(hook)
    for d in ALL_DTYPES:
        if d is not bfloat16:
            hook(d)


def numpy_set(dtypes) -> set:
    """The NumPy dtypes of `dtypes`, as a set that gains bfloat16's when ml_dtypes is imported."""
    found: set = set()
    wanted = {d.name for d in dtypes if d is not None}
    when_loaded(lambda d: found.add(d.np) if d.name in wanted else None)
    return found


def _load_bfloat16() -> np.dtype:
    """bfloat16's NumPy dtype, importing ml_dtypes (once) and telling the tables keyed by NumPy dtypes."""
    import ml_dtypes

    np_dtype = np.dtype(ml_dtypes.bfloat16)
    if "np" not in _loaded:
        bfloat16.np = np_dtype
        _loaded["np"] = np_dtype
        for hook in _loaded_hooks:
            hook(bfloat16)
    return np_dtype


_loaded: dict = {}
FLOAT_NP = numpy_set(FLOAT_DTYPES)  # their NumPy dtypes: the test every float-only rule makes

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update(
    {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32, "short": int16}
)
_BY_NP: dict = {}
when_loaded(lambda d: _BY_NP.__setitem__(d.np, d))

_default_float = float32


def get_default_dtype() -> DType:
    """The dtype of floating-point tensors created from Python floats."""
    return _default_float


def set_default_dtype(dtype: DType) -> None:
    """Set the default floating-point dtype (float32 unless changed)."""
    global _default_float
    dtype = as_dtype(dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes are allowed, got {dtype}")
    _default_float = dtype


def get_dtype(name: str) -> DType:
    """Look a dtype up by name ('float32', 'long', ...)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r}; known: {sorted(_BY_NAME)}") from None


def from_numpy_dtype(np_dtype) -> DType:
    """The Ember dtype that matches a NumPy dtype."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        pass
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NP:
        return _BY_NP[np_dtype]
    if np_dtype.name == "bfloat16" and bfloat16 is not None and np_dtype == bfloat16.np:  # ml_dtypes' own type
        return bfloat16
    if np_dtype.kind == "U" or np_dtype.kind == "S" or np_dtype.kind == "O":
        raise TypeError(f"can't convert an array of dtype {np_dtype} to a tensor: only numbers and bools")
    if np_dtype == np.uint16 or np_dtype == np.uint32 or np_dtype == np.uint64:
        raise TypeError(f"unsupported dtype {np_dtype}: Ember's unsigned type is uint8 only")
    if np_dtype.kind == "c":
        raise TypeError(f"unsupported dtype {np_dtype}: Ember has no complex types")
    raise TypeError(f"unsupported NumPy dtype {np_dtype}")


def as_dtype(dtype) -> DType:
    """Accept an Ember dtype, a NumPy dtype/type, a name, or Python's float/int/bool."""
    if type(dtype) is DType:
        return dtype
    if dtype is float:
        return _default_float
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str):
        return get_dtype(dtype)
    return from_numpy_dtype(dtype)


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's promote_types: the smallest type that holds both (int + float16 -> float16)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == FLOAT:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return float32
        return a if a._rank > b._rank else b
    if a.category == INT:
        if {a.name, b.name} == {"uint8", "int8"}:
            return int16
        if a.name == "uint8":
            return b
        if b.name == "uint8":
            return a
        return a if a._rank > b._rank else b
    return a


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    """c10's combine_categories: a lower-priority operand wins only by being a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def scalar_dtype(value) -> DType:
    """The dtype a Python number takes when it stands alone in an op."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return _default_float
    raise TypeError(f"expected a number, got {type(value).__name__}")


def result_type(*operands) -> DType:
    """PyTorch's result_type over (dtype, ndim) pairs and Python scalars.

    Tensors with dimensions outrank 0-d tensors, which outrank Python scalars; a lower group only
    changes the result when it is of a higher category (so float32 tensor * 2.5 stays float32, and
    int64 tensor + 1.5 becomes the default float).
    """
    dim_result = zero_result = wrapped_result = None
    for op in operands:
        if isinstance(op, tuple):
            dtype, ndim = op
            if ndim > 0:
                dim_result = dtype if dim_result is None else promote_types(dim_result, dtype)
            else:
                zero_result = dtype if zero_result is None else promote_types(zero_result, dtype)
        else:
            dtype = scalar_dtype(op)
            wrapped_result = dtype if wrapped_result is None else promote_types(wrapped_result, dtype)
    return _combine(dim_result, _combine(zero_result, wrapped_result))
