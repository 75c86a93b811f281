"""`Parameter`: a tensor that a Module registers as one of its learnable weights; `UninitializedParameter` and
`UninitializedBuffer`: a lazy module's parameters and buffers before their shapes are known."""

from __future__ import annotations

from ember import creation
from ember.tensor import Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter; it shares storage with the tensor it wraps.

    Assigning a Parameter as a Module attribute registers it, so it shows up in `parameters()`
    and `state_dict()`. Results of operations on a Parameter are plain Tensors.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor, got {type(data).__name__}")
        p = cls._make(data._data, data.device)
        p._version = data._version  # shares storage, so in-place writes are seen through both
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__; Tensor.__init__ would re-create the storage

    @property
    def data(self) -> Tensor:
        """A tensor sharing this parameter's storage, cut from the autograd graph."""
        return self.detach()

    @data.setter
    def data(self, new: Tensor) -> None:
        _swap_storage(self, new)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__  # Tensor aliases __str__ to its own __repr__, which would drop the header

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            result.grad = self.grad.detach().clone()
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


def _swap_storage(t: Tensor, new: Tensor) -> None:
    """Point `t` at `new`'s storage (device and dtype included) while keeping the object itself.

    This is how Module.to() moves parameters without changing their identity, as PyTorch does,
    so optimizers built before the move still hold the right objects.
    """
    if not isinstance(new, Tensor):
        raise TypeError(f"expected a Tensor to take the storage from, got {type(new).__name__}")
    t._data = new._data
    t._device = new.device
    t._version = new._version
    t._base = None
    t._view_fn = None


class UninitializedTensorMixin:
    """What the uninitialized parameter and buffer share: no shape yet; `materialize` gives them one in place."""

    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor `shape` (its values uninitialised), in place: it becomes a cls_to_become."""
        # in place, keeping the object, so an optimizer or a module holding it sees the shaped tensor
        _swap_storage(self, creation.empty(tuple(shape), device=device or self.device, dtype=dtype or self.dtype))
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad, None, self.dtype))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (a lazy layer's, until its first input)."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> UninitializedParameter:
        return super().__new__(cls, creation.empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy norm's running statistics, until its first input)."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True
                ) -> UninitializedBuffer:
        data = creation.empty(0, device=device, dtype=dtype)
        t = cls._make(data._data, data.device)
        t.persistent = persistent  # as torch.nn.Buffer's flag; register_buffer's argument is what Module reads
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True) -> None:
        pass  # everything happens in __new__; Tensor.__init__ would re-create the storage


def is_lazy(obj) -> bool:
    """Whether obj is an UninitializedParameter or an UninitializedBuffer."""
    return isinstance(obj, UninitializedTensorMixin)


def is_parameter(obj) -> bool:
    """Whether obj is a Parameter."""
    return isinstance(obj, Parameter)

