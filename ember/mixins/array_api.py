"""The Array API standard's methods of `ember.Tensor`: `to_device`, shifts and the in-place operators PyTorch
has beyond `+= -= *= /=`."""

from __future__ import annotations

from ember import ops
from ember.device import Device


class ArrayAPIMixin:
    """The operators the Array API needs beyond PyTorch's (`__array_namespace__` itself is bound by the package
    root, the one layer above both Tensor and `ember.array_api`)."""

    __slots__ = ()

    def to_device(self, device, /, *, stream=None):
        """A copy on device (self when it is there already)."""
        if stream is not None:
            raise ValueError("to_device: streams are not supported")
        device = Device(device) if isinstance(device, str) else device
        return self if device == self.device else ops.to_device(self, device)

    def __lshift__(self, other):
        return ops.bitwise_left_shift(self, other)

    def __rlshift__(self, other):
        return ops.bitwise_left_shift(other, self)

    def __rshift__(self, other):
        return ops.bitwise_right_shift(self, other)

    def __rrshift__(self, other):
        return ops.bitwise_right_shift(other, self)

    def __ifloordiv__(self, other):
        return self._inplace("floor_divide_", ops.floor_divide, other)

    def __imod__(self, other):
        return self._inplace("remainder_", ops.remainder, other)

    def __ipow__(self, other):
        return self._inplace("pow_", ops.pow, other)

    def __iand__(self, other):
        return self._inplace("bitwise_and_", ops.bitwise_and, other)

    def __ior__(self, other):
        return self._inplace("bitwise_or_", ops.bitwise_or, other)

    def __ixor__(self, other):
        return self._inplace("bitwise_xor_", ops.bitwise_xor, other)

    def __ilshift__(self, other):
        return self._inplace("bitwise_left_shift_", ops.bitwise_left_shift, other)

    def __irshift__(self, other):
        return self._inplace("bitwise_right_shift_", ops.bitwise_right_shift, other)

    def __imatmul__(self, other):
        return self._inplace("matmul_", ops.matmul, other)

    def __complex__(self) -> complex:
        return complex(self.item())
