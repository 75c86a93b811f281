"""`Parameter`: a tensor that a Module registers as one of its learnable weights."""

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


def is_parameter(obj) -> bool:
    """Whether obj is a Parameter."""
    return isinstance(obj, Parameter)

