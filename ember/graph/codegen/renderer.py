"""The renderer interface: turn a `Region` into a callable kernel for one kind of hardware.

The fusion pass decides *what* is fused; a renderer decides *how* it runs. A renderer says whether
it can run a region (`supports`), estimates its cost (used to choose between renderers), and
`build`s a callable `kernel(arrays) -> list of output arrays`. A CUDA renderer would render the
same region as CUDA C; nothing in the fusion pass changes.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from ember.graph.codegen.region import Region

Kernel = Callable[[list, list | None], list]  # (input arrays, output arrays or None) -> outputs


class Renderer(ABC):
    """Generates and compiles code for fused regions."""

    name: str = ""

    def available(self) -> bool:
        """Whether the renderer's toolchain can be used in this process."""
        return True

    @abstractmethod
    def supports(self, region: Region) -> bool:
        """Whether every instruction of the region (with its dtypes) can be rendered."""

    @abstractmethod
    def cost(self, region: Region) -> float:
        """Rough nanoseconds per element, to pick the cheaper renderer."""

    @abstractmethod
    def build(self, region: Region) -> Kernel:
        """A callable `kernel(arrays, outs)` computing the region's outputs (into `outs` when not None)."""


def literal(value: float, dtype) -> str:
    """Source text for a scalar of `dtype` with `value` (as the ops would convert a Python number)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind == "f":
        v = float(value)
        if math.isnan(v):
            text = "np.nan"
        elif math.isinf(v):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(v)
        return f"np.{dtype.name}({text})"
    return f"np.{dtype.name}({int(value)})"


def fits(value: float, dtype) -> bool:
    """Whether a Python number converts to `dtype` without NumPy raising (ints in range)."""
    dtype = np.dtype(dtype)
    if isinstance(value, bool) or dtype.kind in "fb":
        return True
    if dtype.kind in "iu":
        if isinstance(value, float):
            return False
        info = np.iinfo(dtype)
        return info.min <= value <= info.max
    return False


def operand_dtype(region: Region, arg: tuple) -> np.dtype | None:
    """The dtype of an operand as stored (None for a Python scalar)."""
    if arg.kind == "in":
        return region.inputs[arg.ref][0]
    if arg.kind == "t":
        return region.instrs[arg.ref].dtype
    return None


def common_shape(shapes) -> tuple:
    """np.broadcast_shapes of `shapes`, with the common cases (all equal, or equal but for 0-d values such
    as optimizer hyperparameters) decided without NumPy's general, slower routine."""
    distinct = set(shapes)
    if len(distinct) == 1:
        return next(iter(distinct))
    if len(distinct) == 2 and () in distinct:
        distinct.discard(())
        return next(iter(distinct))
    return np.broadcast_shapes(*shapes)
