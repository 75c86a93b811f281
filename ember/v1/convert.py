"""Turning Python values, NumPy arrays and Ember tensors into tensors of the default graph."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.dispatch import is_symbolic as _is_symbolic
from ember.tensor import Tensor
from ember.v1.graph_api import get_default_graph
from ember.v1.graph_tensor import GraphTensor


def is_symbolic(x) -> bool:
    """Whether x is a tensor of a graph (not a concrete tensor or a Python value)."""
    return isinstance(x, Tensor) and _is_symbolic(x)


def np_dtype(dtype) -> np.dtype | None:
    """A NumPy dtype from an Ember dtype, a NumPy dtype, a name or Python's float/int/bool."""
    return None if dtype is None else dt.as_dtype(dtype).np


def host_array(value, dtype=None) -> np.ndarray:
    """A NumPy array with TF's dtype defaults for Python data (float32, int32); arrays keep theirs."""
    if isinstance(value, Tensor):
        value = np.asarray(value.detach())
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
    else:
        arr = np.asarray(value)
        if dtype is None:
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            elif arr.dtype.kind in "iu" and arr.dtype != np.uint8:
                arr = arr.astype(np.int32)
    if arr.dtype.kind in "OUS":
        raise TypeError(f"cannot make a tensor from {type(value).__name__} data (dtype {arr.dtype})")
    if dtype is not None:
        want = np_dtype(dtype)
        if want.kind in "iu" and arr.dtype.kind == "f" and not isinstance(value, (np.ndarray, np.generic)):
            # TF refuses Python floats for an integer dtype rather than truncate them (NumPy arrays it casts).
            raise TypeError(f"Expected {want.name}, got {_first_float(value)!r} of type 'float' instead.")
        arr = arr.astype(want, copy=False)
    dt.from_numpy_dtype(arr.dtype)  # rejects dtypes Ember does not have, with a clear message
    return arr


def _first_float(value):
    """The first Python float in (possibly nested) list data, as TF's message names it."""
    if isinstance(value, (list, tuple)):
        return next((f for f in map(_first_float, value) if f is not None), None)
    return value if isinstance(value, float) else None


def constant_tensor(arr: np.ndarray, name: str | None = None) -> Tensor:
    """A constant node of the default graph holding `arr` (named `name` in the current scope, else "Const")."""
    graph = get_default_graph()
    device = graph.device
    value = graph.constant(device.backend.from_host(np.asarray(arr, order="C")), device,
                           name=graph.scoped_name(name) if name else None)
    return GraphTensor._make(value, device)


def convert_to_tensor(value, dtype=None, name: str | None = None, dtype_hint=None) -> Tensor:
    """A graph tensor for `value`: tensors pass through, concrete tensors are captured, data becomes a constant."""
    if isinstance(value, Tensor):
        if is_symbolic(value):
            value = in_default_graph(value)
            if dtype is not None and value._data.dtype != np_dtype(dtype):
                raise TypeError(
                    f"expected a tensor of dtype {dt.as_dtype(dtype).name}, got one of dtype {value.dtype.name}"
                )
            return value
        graph = get_default_graph()
        out = GraphTensor._make(graph.capture(value), value._device)
        return out.to(dt.as_dtype(dtype)) if dtype is not None and value._data.dtype != np_dtype(dtype) else out
    from ember.v1.graph_api import Operation

    if isinstance(value, Operation):
        raise TypeError(f"cannot use operation {value.name!r} as a tensor: it has no value")
    if isinstance(value, (list, tuple)) and any(is_symbolic(v) for v in value):
        from ember.v1.array_ops import stack

        return stack([convert_to_tensor(v, dtype) for v in value])
    return constant_tensor(host_array(value, dtype if dtype is not None else dtype_hint), name)


def in_default_graph(t: Tensor) -> Tensor:
    """A graph tensor as seen from the default graph: inside a control-flow function (cond, while_loop) a
    tensor of an enclosing graph is captured; anything else is returned as it is."""
    graph = get_default_graph()
    owner = t._data.node.graph
    if owner is not graph and hasattr(graph, "capture_tensor") and graph.encloses(owner):
        return graph.capture_tensor(t)
    return t


def graph_for(t: Tensor):
    """The graph an op on `t` (e.g. an assignment to a variable) is built in: the default graph when it is
    `t`'s or a control-flow function inside it, else `t`'s own."""
    graph = get_default_graph()
    owner = t._data.node.graph
    if graph is owner or (hasattr(graph, "encloses") and graph.encloses(owner)):
        return graph
    return owner


def operands(x, y) -> tuple:
    """Two operands as tensors; plain data takes the dtype of the tensor operand (TF converts it so)."""
    if is_symbolic(x) or isinstance(x, Tensor):
        x = convert_to_tensor(x)
        return x, _like(y, x)
    if is_symbolic(y) or isinstance(y, Tensor):
        y = convert_to_tensor(y)
        return _like(x, y), y
    return convert_to_tensor(x), convert_to_tensor(y)


def _like(v, ref: Tensor):
    """v as an operand next to the tensor `ref`: Python numbers stay numbers, data gets ref's dtype."""
    if isinstance(v, Tensor):
        return convert_to_tensor(v)
    if isinstance(v, (bool, int, float)):
        return v
    arr = np.asarray(v)
    kind = ref._data.dtype.kind
    if arr.dtype.kind in "iub" or (arr.dtype.kind == "f" and kind == "f"):
        return convert_to_tensor(arr.astype(ref._data.dtype))
    return convert_to_tensor(arr)
