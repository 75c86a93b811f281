"""Turning a list of samples into a batch: `default_collate` and `default_convert`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.creation import from_numpy, tensor
from ember.ops import stack
from ember.tensor import Tensor


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _check_array(arr: np.ndarray) -> None:
    if not _is_ember_dtype(arr.dtype):
        raise TypeError(f"default_collate: NumPy arrays of dtype {arr.dtype} can't become tensors")


def _is_ember_dtype(np_dtype) -> bool:
    try:
        dt.from_numpy_dtype(np_dtype)
    except (TypeError, ValueError, KeyError):
        return False
    return True


def default_collate(batch: Sequence) -> Any:
    """Stack a list of samples into a batch, keeping the samples' structure.

    Tensors and NumPy arrays are stacked along a new first dim; Python floats, ints and bools become
    float64, int64 and bool tensors; strings stay a list; dicts, tuples, named tuples and lists are
    collated field by field. Unlike PyTorch, a tuple sample gives a tuple batch (not a list).
    """
    if len(batch) == 0:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        _check_array(elem)
        return from_numpy(np.stack(batch))
    if isinstance(elem, np.generic):
        arr = np.asarray(batch)
        _check_array(arr)
        return from_numpy(arr)
    if isinstance(elem, bool):
        return tensor(batch, dtype=dt.bool_)
    if isinstance(elem, float):
        return tensor(batch, dtype=dt.float64)
    if isinstance(elem, int):
        return tensor(batch, dtype=dt.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        out = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(out)
        except TypeError:  # a Mapping type that can't be built from a dict
            return out
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(x) != size for x in batch):
            sizes = sorted({len(x) for x in batch})
            raise RuntimeError(f"default_collate: each sample in the batch must have the same number of fields, "
                               f"got sizes {sizes}")
        fields = [default_collate(list(samples)) for samples in zip(*batch)]
        if _is_namedtuple(elem):
            return type(elem)(*fields)
        if isinstance(elem, tuple):
            return tuple(fields)
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(
        f"default_collate: samples must hold tensors, NumPy arrays, numbers, strings, dicts or sequences; "
        f"got {type(elem).__name__}"
    )


def default_convert(data: Any) -> Any:
    """Turn NumPy arrays and scalars in a sample into tensors, leaving everything else as is (no batching)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return from_numpy(data) if _is_ember_dtype(data.dtype) else data
    if isinstance(data, np.generic):
        return from_numpy(np.asarray(data))
    if isinstance(data, Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if _is_namedtuple(data):
        return type(data)(*(default_convert(x) for x in data))
    if isinstance(data, tuple):
        return tuple(default_convert(x) for x in data)
    if isinstance(data, list):
        return [default_convert(x) for x in data]
    return data
