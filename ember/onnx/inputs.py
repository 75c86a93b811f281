"""The inputs an ONNX graph declares, and the check of each value fed to one, as onnxruntime checks them.

A static dim must match; a symbolic (`dim_param`) or unset dim accepts any size; a declared rank must
match. An array or tensor must have the declared element type exactly; Python numbers and lists take
it, as long as that changes only the width of their kind (ints to a float input, not floats to an int).
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.tensor import Tensor


class InputSpec:
    """One graph input: its name, NumPy dtype (None if undeclared) and dims (int, str or None each; None if no shape)."""

    def __init__(self, value_info, helper) -> None:
        self.name = value_info.name
        tensor_type = value_info.type.tensor_type
        self.dtype = None
        if tensor_type.elem_type:
            try:
                self.dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
            except (KeyError, TypeError, ValueError):  # a type NumPy has no dtype for: left to the ops
                self.dtype = None
        self.dims = None
        if tensor_type.HasField("shape"):
            self.dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         for d in tensor_type.shape.dim]

    def declared(self) -> str:
        """The declared shape as users write it, with symbolic dims by name."""
        dims = ["?" if d is None else str(d) for d in self.dims]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def check(self, value):
        """`value` as a tensor or array of the declared dtype and a shape that fits; an error naming the input if not."""
        if isinstance(value, Tensor):
            given = np.dtype(value.dtype.np)
        elif isinstance(value, (np.ndarray, np.generic)):
            value = np.asarray(value)
            given = value.dtype
        else:  # Python numbers and (nested) lists
            value = np.asarray(value)
            if self.dtype is not None and value.dtype != self.dtype \
                    and np.can_cast(value.dtype, self.dtype, casting="same_kind"):
                value = value.astype(self.dtype)
            given = value.dtype
        if self.dtype is not None and given != self.dtype:
            raise TypeError(f"ember.onnx.load: input {self.name!r} is {given.name} but the model declares "
                            f"{self.dtype.name}")
        shape = tuple(int(d) for d in value.shape)
        if self.dims is not None:
            if len(shape) != len(self.dims):
                raise ShapeError(f"ember.onnx.load: input {self.name!r} has shape {shape} but the model declares "
                                 f"{self.declared()}: {len(shape)} dimensions, expected {len(self.dims)}")
            wrong = [f"dimension {i} is {n}, expected {d}" for i, (n, d) in enumerate(zip(shape, self.dims))
                     if isinstance(d, int) and n != d]
            if wrong:
                raise ShapeError(f"ember.onnx.load: input {self.name!r} has shape {shape} but the model declares "
                                 f"{self.declared()}: {'; '.join(wrong)}")
        return value
