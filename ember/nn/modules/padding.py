"""Padding layers, PyTorch's names: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad in 1, 2 and 3
dims, each nn.functional.pad with its mode and a padding fixed at construction: one int for every side, or (left,
right) for 1 dim, (left, right, top, bottom) for 2 and (left, right, top, bottom, front, back) for 3. The reflection,
replication and circular layers take an input with those dims and one or two before them (a batch, channels)."""

from __future__ import annotations

from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.tensor import Tensor

_SIDES = ("left, right", "left, right, top, bottom", "left, right, top, bottom, front, back")


class _PadNd(Module):
    dims = 1
    mode = "constant"

    def __init__(self, padding, value: float = 0.0) -> None:
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self.dims)
        padding = tuple(padding)
        if len(padding) != 2 * self.dims or not all(isinstance(p, int) for p in padding):
            raise ValueError(f"{type(self).__name__}: padding must be an int or {2 * self.dims} ints "
                             f"({_SIDES[self.dims - 1]}), got {padding!r}")
        self.padding = padding
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        if input.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"{type(self).__name__}: expected a {self.dims + 1}-D or {self.dims + 2}-D (batched) "
                             f"input, got shape {tuple(input.shape)}")
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding, value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad:
    """ConstantPadNd with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class _CircularPadNd(_PadNd):
    mode = "circular"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`."""

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with `value`."""

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with `value`."""

    dims = 3


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pad the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pad the last two dims with zeros."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pad the last three dims with zeros."""


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dim with its reflection (the edge value not repeated)."""

    dims = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Pad the last two dims with its reflection (the edge value not repeated)."""

    dims = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Pad the last three dims with its reflection (the edge value not repeated)."""

    dims = 3


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dim by repeating its edge values."""

    dims = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Pad the last two dims by repeating its edge values."""

    dims = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Pad the last three dims by repeating its edge values."""

    dims = 3


class CircularPad1d(_CircularPadNd):
    """Pad the last dim periodically, with the values from the other end."""

    dims = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims periodically, with the values from the other end."""

    dims = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims periodically, with the values from the other end."""

    dims = 3
