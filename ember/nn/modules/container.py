"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from __future__ import annotations

import itertools
import operator
from collections import OrderedDict
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView

from ember.graph import module_structure as structure
from ember.graph.module_structure import TrackedDict
from ember.nn.modules.module import Module, _addindent
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _set_modules(container: Module, items) -> None:
    """Replace a container's children (renumbered) as one counted change of module structure."""
    structure.changed()
    container.__dict__["_modules"] = TrackedDict(items)


def _set_size(container: Module, size: int) -> None:
    """A ParameterList's length, kept outside its attributes so that it is not taken for a parameter."""
    structure.changed()
    container.__dict__["_size"] = size


def _index(n: int, idx, what: str) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Runs its modules in order, each on the previous one's output.

    Built from modules as arguments (named '0', '1', ...) or from one OrderedDict of named modules.
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _key(self, idx) -> str:
        return list(self._modules)[_index(len(self._modules), idx, "Sequential")]

    def __getitem__(self, idx) -> Module:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        _set_modules(self, zip((str(i) for i in range(len(self._modules))), self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        out = Sequential()
        for layer in itertools.chain(self, other):
            out.append(layer)
        return out

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(other)

    def __mul__(self, other: int) -> Sequential:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        out = Sequential()
        for _ in range(other):
            for m in self:
                out.append(m)  # the same module objects, as PyTorch does
        return out

    def append(self, module: Module) -> Sequential:
        """Add a module at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert a module before position `index`."""
        if not isinstance(module, Module):
            raise TypeError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        mods = list(self._modules.values())
        mods.insert(index, module)
        _set_modules(self, ((str(i), m) for i, m in enumerate(mods)))
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Add every module of an iterable at the end."""
        for layer in sequential:
            self.append(layer)
        return self

    def pop(self, key) -> Module:
        """Remove and return the module at `key`."""
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules that registers them (indexable like a Python list; no forward)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(len(self), idx, "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(len(self), idx, "ModuleList")), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_index(len(self), idx, "ModuleList")))
        _set_modules(self, ((str(i), m) for i, m in enumerate(self._modules.values())))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        out = ModuleList()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module: Module) -> ModuleList:
        """Add a module at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Add every module of an iterable at the end."""
        if not isinstance(modules, Iterable):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert a module before position `index`."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        _set_modules(self, ())
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key=-1) -> Module:
        """Remove and return the module at `key`."""
        v = self[key]
        del self[key]
        return v

    def __repr__(self) -> str:
        # PyTorch's compact form: runs of identical children print once as "(i-j): n x ...".
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for start, end, r in blocks:
            text = f"({start}): {r}" if start == end else f"({start}-{end}): {end - start + 1} x {r}"
            lines.append(_addindent(text, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class ModuleDict(Module):
    """An ordered dict of modules that registers them."""

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under `key`."""
        v = self[key]
        del self[key]
        return v

    def keys(self) -> KeysView[str]:
        """The names."""
        return self._modules.keys()

    def items(self) -> ItemsView[str, Module]:
        """(name, module) pairs."""
        return self._modules.items()

    def values(self) -> ValuesView[Module]:
        """The modules."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Add modules from a mapping or an iterable of (name, module) pairs."""
        items = modules.items() if isinstance(modules, Mapping) else modules
        for j, item in enumerate(items):
            if not isinstance(modules, Mapping) and len(item) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(item)}; 2 is required")
            self[item[0]] = item[1]


class ParameterList(Module):
    """A list of parameters that registers them (tensors are wrapped as Parameters)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        _set_size(self, 0)
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(len(self), idx, "ParameterList")))

    def __setitem__(self, idx: int, param) -> None:
        idx = _index(len(self), idx, "ParameterList")
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, params: Iterable) -> ParameterList:
        return self.extend(params)

    def append(self, value) -> ParameterList:
        """Add a parameter at the end."""
        new_idx = len(self)
        _set_size(self, self._size + 1)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, str(new_idx), value)
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Add every parameter of an iterable at the end."""
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        lines = []
        for k, p in enumerate(self):
            if isinstance(p, Tensor):
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                size = "x".join(str(s) for s in p.shape)
                device = "" if p.device.type == "cpu" else f" ({p.device})"
                lines.append(f"  ({k}): {kind} containing: [ember.{p.dtype.name} of size {size}{device}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters that registers them."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self.__dict__["_keys"] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self) -> KeysView[str]:
        """The names."""
        return self._keys.keys()

    def items(self) -> Iterator[tuple[str, Parameter]]:
        """(name, parameter) pairs."""
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterator[Parameter]:
        """The parameters."""
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Add parameters from a mapping or an iterable of (name, parameter) pairs."""
        items = parameters.items() if isinstance(parameters, Mapping) else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self) -> str:
        lines = []
        for k, p in self.items():
            size = "x".join(str(s) for s in p.shape)
            lines.append(f"  ({k}): Parameter containing: [ember.{p.dtype.name} of size {size}]")
        return "\n".join(lines)
