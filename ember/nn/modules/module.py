"""`Module`: the base class of every layer — registration, traversal, state dicts, hooks, repr."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from ember import creation, dtypes
from ember.autograd import grad_mode
from ember.autograd.zero_grad import zero_grads
from ember.device import Device
from ember.dtypes import DType
from ember.graph import module_structure as structure
from ember.graph.module_structure import TrackedDict, TrackedOrderedDict
from ember.nn.modules.compiled_call import CompileMixin
from ember.nn.modules.state_hooks import EXTRA_STATE_KEY, StateHooksMixin
from ember.nn.parameter import Parameter, _swap_storage
from ember.nn.utils.hooks import RemovableHandle
from ember.tensor import Tensor


class _IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) could not match."""

    missing_keys: list
    unexpected_keys: list

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * num_spaces + line for line in lines)


def _fmt_size(shape) -> str:
    return str(tuple(shape))


_HOOK_STORES = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
                "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


class Module(StateHooksMixin, CompileMixin):
    """Base class for all neural-network modules (PyTorch's interface).

    Subclasses call `super().__init__()` and then assign Parameters, buffers and submodules as
    attributes; `forward` defines the computation and calling the module runs it with hooks.
    """

    training: bool
    _version: int = 1  # state-dict format version, stored in state_dict()._metadata

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        structure.changed()  # a new module: see graph/module_structure.py
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = TrackedDict()
        d["_buffers"] = TrackedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = TrackedDict()
        for name in _HOOK_STORES:
            d[name] = TrackedOrderedDict()

    def forward(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # --- registration --------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(ember.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                "explicitly; to express '{name}' as a function of another Tensor, compute the value in forward()."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not trained (e.g. running means); `persistent` ones go in state_dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name`."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string, got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name: str):
        # reached for every parameter, buffer and submodule read (self.weight): the three stores unrolled, as a
        # loop over their names cost twice as long (0.9 us a read, six or more reads in a layer's forward)
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None and name in params:
            return params[name]
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            return buffers[name]
        modules = d.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        structure.changed()
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(ember.nn.Parameter or None expected)"
                )
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        structure.changed()
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # --- traversal ---------------------------------------------------------------------
    def _named_members(self, get_members, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in mods:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module (and its descendants), each once."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs, e.g. ('features.0.weight', ...)."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module (and its descendants)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, e.g. ('bn.running_mean', ...)."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator[Module]:
        """The direct submodules."""
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) pairs for the direct submodules, each once."""
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator[Module]:
        """This module and all its descendants, depth first, each once."""
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) pairs for this module ('') and all its descendants."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as 'features.0'."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put `module` at a dotted path such as 'features.0' (with strict, only where a submodule is already)."""
        if not isinstance(module, Module):
            raise ValueError(f"`{module}` is not an nn.Module, found {type(module)}")
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not isinstance(getattr(parent, name, None), Module):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`" if not hasattr(parent, name)
                                 else f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at a dotted path such as 'features.0.weight'."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path such as 'bn.running_mean'."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    # --- modes and in-place transforms ----------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (affects Dropout, BatchNorm, ...) here and in all descendants."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)  # through the method, so subclasses that override train() see it
        return self

    def eval(self) -> Module:
        """Set evaluation mode (same as train(False))."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Turn gradient recording for every parameter on or off."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None by default)."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call fn on every submodule (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Transform every parameter (in place, keeping its identity), gradient and buffer."""
        for m in self.children():
            m._apply(fn)
        with grad_mode.no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                _swap_storage(p, fn(p))
                if p.grad is not None:
                    p.grad = fn(p.grad)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Parameters and buffers moved to `device` without their values (uninitialised storage of the same shapes
        and dtypes): a model built on the meta device made real, to be initialised or loaded next."""
        def empty(t):
            return creation.empty(tuple(t.shape), dtype=t.dtype, device=device)

        if recurse:
            return self._apply(empty)
        with grad_mode.no_grad():  # this module's own tensors only
            for p in self._parameters.values():
                if p is not None:
                    _swap_storage(p, empty(p))
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = empty(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast the parameters and buffers in place: to(device), to(dtype), to(device, dtype).

        Only floating-point tensors are cast to a dtype (integer buffers keep theirs), as in PyTorch.
        """
        device, dtype = _parse_to(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            if dtype is not None and t.is_floating_point():
                return t.to(device=device, dtype=dtype)
            return t.to(device) if device is not None else t

        return self._apply(convert)

    def cpu(self) -> Module:
        """Move everything to the cpu device."""
        return self.to("cpu")

    def cuda(self, device=None) -> Module:
        """Move everything to a CUDA device."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def float(self) -> Module:
        """Cast floating-point parameters and buffers to float32."""
        return self.to(dtypes.float32)

    def double(self) -> Module:
        """Cast floating-point parameters and buffers to float64."""
        return self.to(dtypes.float64)

    def half(self) -> Module:
        """Cast floating-point parameters and buffers to float16."""
        return self.to(dtypes.float16)

    def bfloat16(self) -> Module:
        """Cast floating-point parameters and buffers to bfloat16."""
        return self.to(dtypes.bfloat16)

    def type(self, dst_type) -> Module:
        """Cast all parameters and buffers to dst_type."""
        return self._apply(lambda t: t.to(dst_type))

    # --- state dicts ---------------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + EXTRA_STATE_KEY] = self.get_extra_state()

    def state_dict(self, *args, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (tensors share storage with the module)."""
        if args:  # the legacy positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        local_metadata = {"version": self._version}
        if meta is not None:
            meta[prefix[:-1]] = local_metadata
        self._run_state_hooks("_state_dict_pre_hooks", prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        self._run_state_hooks("_state_dict_hooks", destination, prefix, local_metadata)
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """Copy this module's own entries (not its children's) from state_dict."""
        self._run_state_hooks("_load_state_dict_pre_hooks", state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs)
        if self._has_extra_state():
            if prefix + EXTRA_STATE_KEY in state_dict:
                self.set_extra_state(state_dict[prefix + EXTRA_STATE_KEY])
            elif strict:
                missing_keys.append(prefix + EXTRA_STATE_KEY)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            try:
                value = _as_tensor(value)
            except TypeError:
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected a Tensor or array from checkpoint '
                    f"but received {type(value)}"
                )
                continue
            if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value[0]
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {_fmt_size(value.shape)} from "
                    f"checkpoint, the shape in current model is {_fmt_size(param.shape)}."
                )
                continue
            try:
                if local_metadata.get("assign_to_params_buffers", False):
                    self._assign_loaded(name, param, value)
                else:
                    with grad_mode.no_grad():
                        param.copy_(value)
            except Exception as e:  # report every failure together, as PyTorch does
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{_fmt_size(param.shape)} and whose dimensions in the checkpoint are "
                    f"{_fmt_size(value.shape)}, an exception occurred : {e.args}."
                )
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if input_name[0] not in self._modules and input_name[0] not in local_state and not (
                            input_name[0] == EXTRA_STATE_KEY and self._has_extra_state()):
                        unexpected_keys.append(key)

    def _assign_loaded(self, name: str, current: Tensor, value: Tensor) -> None:
        """load_state_dict(assign=True): take the loaded tensor itself (its dtype and device)."""
        if name in self._parameters:
            self._parameters[name] = Parameter(value.detach(), requires_grad=current.requires_grad)
        else:
            self._buffers[name] = value

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from state_dict into this module in place.

        With strict=True a RuntimeError lists every missing key, unexpected key and shape mismatch.
        Values may be Ember tensors or anything array-like (NumPy arrays, other frameworks' tensors).
        With assign=True the loaded tensors replace the module's (keeping their dtype and device).
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        missing_keys: list = []
        unexpected_keys: list = []
        error_msgs: list = []

        def load(module: Module, prefix: str = "") -> None:
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = True
            module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            module._run_state_hooks("_load_state_dict_post_hooks", _IncompatibleKeys(missing_keys, unexpected_keys))

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # --- hooks and calling ------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args) runs before forward; a non-None result replaces the args.

        With with_kwargs=True: hook(module, args, kwargs) may return a new (args, kwargs).
        """
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """hook(module, args, output) runs after forward; a non-None result replaces the output.

        With with_kwargs=True the hook is hook(module, args, kwargs, output); with always_call=True it
        also runs (with output None) when forward raises.
        """
        handle = RemovableHandle(
            self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called]
        )
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_output) runs when the gradients of the module's outputs are computed; a non-None result
        replaces them."""
        return self._add_backward_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_input, grad_output) runs when the gradients of the module's tensor inputs are computed
        (grad_input None where an input needs none); a non-None result replaces grad_input."""
        return self._add_backward_hook(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's deprecated form, whose grad_input is its last operation's: refused (use
        register_full_backward_hook, the module's own inputs' gradients)."""
        raise NotImplementedError(f"{type(self).__name__}.register_backward_hook: the deprecated non-full backward "
                                  "hook (grad_input of the module's last operation) is not supported; use "
                                  "register_full_backward_hook")

    def _add_backward_hook(self, store, hook: Callable, prepend: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"backward hook must be callable, got {type(hook).__name__}")
        handle = RemovableHandle(store)
        store[handle.id] = hook
        if prepend:
            store.move_to_end(handle.id, last=False)
        return handle

    def __call__(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), got {result}."
                        )
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if self._backward_hooks or self._backward_pre_hooks:
            from ember.nn.modules.backward_hooks import run_with_backward_hooks

            return run_with_backward_hooks(self, args, lambda wrapped: self._forward_with_hooks(wrapped, kwargs))
        return self._forward_with_hooks(args, kwargs)

    def _forward_with_hooks(self, args: tuple, kwargs: dict):
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called:
                    if hook_id in self._forward_hooks_with_kwargs:
                        hook(self, args, kwargs, None)
                    else:
                        hook(self, args, None)
            raise
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # --- text ------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in repr (subclasses override)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __setstate__(self, state: dict) -> None:
        structure.changed()
        d = self.__dict__
        d.update(state)
        d.setdefault("_non_persistent_buffers_set", set())
        for name in ("_parameters", "_buffers", "_modules") + _HOOK_STORES:
            d[name] = structure.tracked(d.get(name, {}), ordered=name in _HOOK_STORES)


def _check_name(name, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{what} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')


def _remove_from(name: str, d: dict, *stores) -> None:
    for store in stores:
        if name in store:
            if isinstance(store, dict):
                del store[name]
            else:
                store.discard(name)
    d.pop(name, None)


def _as_tensor(value) -> Tensor:
    """Accept Ember tensors and anything NumPy can turn into an array (e.g. other frameworks' tensors)."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a foreign tensor that may require grad
        value = value.detach().cpu()
    if not hasattr(value, "__array__") and not isinstance(value, (np.ndarray, np.generic)):
        raise TypeError(f"not a tensor: {type(value)}")
    return creation.tensor(np.asarray(value))


def _parse_to(args: tuple, kwargs: dict):
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, (str, Device)):
            device = a
        elif isinstance(a, DType):
            dtype = a
        elif isinstance(a, bool) or a is None:
            continue  # the legacy non_blocking positional
        else:
            raise TypeError(f"to() received an invalid argument {a!r}")
    return device, dtype


structure.register_module_class(Module)  # what ember.jit keys a function on (graph/module_structure.py)
