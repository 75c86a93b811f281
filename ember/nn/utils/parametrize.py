"""Parametrizations, PyTorch's `nn.utils.parametrize`: a module's tensor computed from other tensors at every read
(module.weight = f(original)), the originals being what optimizers train and state dicts save
("parametrizations.weight.original"). Registering one swaps the module's class for a subclass with a property of that
name, as PyTorch does, so a read costs one call and the module keeps its type for isinstance."""

from __future__ import annotations

import contextlib

from ember.autograd import grad_mode
from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

_cache: dict = {"enabled": 0, "values": {}}


@contextlib.contextmanager
def cached():
    """Within it, each parametrized tensor is computed once (on its first read) rather than at every read."""
    _cache["enabled"] += 1
    try:
        yield
    finally:
        _cache["enabled"] -= 1
        if not _cache["enabled"]:
            _cache["values"] = {}


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to its original(s): `original`, or `original0`,
    `original1`, ... where the first parametrization's right_inverse splits the tensor into several."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        with grad_mode.no_grad():
            start = first.right_inverse(original) if hasattr(first, "right_inverse") else original
        self.is_tensor = isinstance(start, Tensor)
        self.ntensors = 1 if self.is_tensor else len(start)
        trainable = isinstance(original, Parameter) or original.requires_grad
        values = [start] if self.is_tensor else list(start)
        for k, value in enumerate(values):
            name = "original" if self.is_tensor else f"original{k}"
            if trainable:
                self.register_parameter(name, Parameter(value.detach().clone(), original.requires_grad))
            else:
                self.register_buffer(name, value.detach().clone())

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor becomes `value` (each parametrization's right_inverse
        applied in reverse order)."""
        with grad_mode.no_grad():
            for p in reversed(list(self)[1:]):
                value = p.right_inverse(value) if hasattr(p, "right_inverse") else value
            first = self[0]
            value = first.right_inverse(value) if hasattr(first, "right_inverse") else value
            values = [value] if self.is_tensor else list(value)
            for k, v in enumerate(values):
                getattr(self, "original" if self.is_tensor else f"original{k}").copy_(v)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{k}") for k in range(self.ntensors)))
        for p in list(self)[1:]:
            x = p(x)
        return x


def _property(name: str) -> property:
    def get(module):
        if _cache["enabled"]:
            key = (id(module), name)
            if key not in _cache["values"]:
                _cache["values"][key] = module.parametrizations[name]()
            return _cache["values"][key]
        return module.parametrizations[name]()

    def set_(module, value):
        module.parametrizations[name].right_inverse(value)

    return property(get, set_)


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has a parametrization (on `tensor_name`, if given)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return bool(len(parametrizations)) if tensor_name is None else tensor_name in parametrizations


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False):
    """Make module.<tensor_name> parametrization(original): on a parametrized name, applied after the ones there;
    returns the module."""
    if is_parametrized(module, tensor_name):
        parametrizations = module.parametrizations[tensor_name]
        current = getattr(module, tensor_name)
        if not unsafe:
            with grad_mode.no_grad():
                out = parametrization(current)
            if tuple(out.shape) != tuple(current.shape) or out.dtype != current.dtype:
                raise ValueError(f"register_parametrization: the parametrization changes {tensor_name}'s shape or "
                                 f"dtype ({tuple(current.shape)} {current.dtype.name} -> {tuple(out.shape)} "
                                 f"{out.dtype.name}); pass unsafe=True to allow it")
        parametrizations.append(parametrization)
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"register_parametrization: {type(module).__name__} has no parameter or buffer "
                         f"{tensor_name!r}")
    original = getattr(module, tensor_name)
    parametrizations = ParametrizationList([parametrization], original, unsafe)
    if not unsafe:
        with grad_mode.no_grad():
            out = parametrizations()
        if tuple(out.shape) != tuple(original.shape) or out.dtype != original.dtype:
            raise ValueError(f"register_parametrization: the parametrization changes {tensor_name}'s shape or dtype "
                             f"({tuple(original.shape)} {original.dtype.name} -> {tuple(out.shape)} "
                             f"{out.dtype.name}); pass unsafe=True to allow it")
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"_unparametrized_class": cls})
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = parametrizations
    setattr(type(module), tensor_name, _property(tensor_name))
    return module


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True):
    """Undo the parametrizations of module.<tensor_name>: it becomes a plain parameter (or buffer) again, holding
    the parametrized value (leave_parametrized) or the original; returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: {type(module).__name__} has no parametrization on "
                         f"{tensor_name!r}")
    parametrizations = module.parametrizations[tensor_name]
    if not leave_parametrized and not parametrizations.is_tensor:
        raise ValueError(f"remove_parametrizations: {tensor_name!r} has several originals; only "
                         "leave_parametrized=True can remove it")
    with grad_mode.no_grad():
        value = getattr(module, tensor_name) if leave_parametrized else parametrizations.original
    trainable = "original" in parametrizations._parameters or "original0" in parametrizations._parameters
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if trainable:
        module.register_parameter(tensor_name, Parameter(value.detach().clone()))
    else:
        module.register_buffer(tensor_name, value.detach().clone())
    if not len(module.parametrizations):
        del module.parametrizations
        module.__class__ = module._unparametrized_class
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered."""
    return module._unparametrized_class if is_parametrized(module) else type(module)
