"""What a module adds to its state dict beyond its tensors, PyTorch's names: the state-dict and load hooks
(`register_state_dict_pre_hook`, `register_state_dict_post_hook`, `register_load_state_dict_pre_hook`,
`register_load_state_dict_post_hook`) and a module's extra state (`get_extra_state`/`set_extra_state`, saved under
`<prefix>_extra_state` where a subclass defines them). `Module.state_dict` and `load_state_dict` call these."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ember.nn.utils.hooks import RemovableHandle

EXTRA_STATE_KEY = "_extra_state"


class StateHooksMixin:
    """State-dict hooks and extra state of `nn.Module`."""

    def _state_hooks(self, name: str) -> OrderedDict:
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = self.__dict__[name] = OrderedDict()
        return hooks

    def _register_state_hook(self, name: str, hook: Callable) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{name.strip('_').replace('_', ' ')}: hook must be callable, got {type(hook).__name__}")
        hooks = self._state_hooks(name)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, prefix, keep_vars) runs before the module's own entries are saved by state_dict."""
        return self._register_state_hook("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, state_dict, prefix, local_metadata) runs after the module and its children are saved; it may
        change state_dict in place."""
        return self._register_state_hook("_state_dict_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs) runs
        before the module's own entries are loaded; it may change state_dict in place."""
        return self._register_state_hook("_load_state_dict_pre_hooks", hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, incompatible_keys) runs after the module and its children are loaded; it may remove keys from
        incompatible_keys.missing_keys and .unexpected_keys."""
        return self._register_state_hook("_load_state_dict_post_hooks", hook)

    def _run_state_hooks(self, name: str, *args) -> None:
        for hook in list(self.__dict__.get(name, {}).values()):
            result = hook(self, *args)
            if result is not None and name != "_load_state_dict_pre_hooks":
                raise RuntimeError(f"{type(self).__name__}: a {name.strip('_').replace('_', ' ')} hook must return "
                                   f"None, got {type(result).__name__}")

    def get_extra_state(self):
        """State beyond parameters and buffers to save under '_extra_state' (subclasses that have some define it)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called: define "
                           "get_extra_state() in the module to save extra state")

    def set_extra_state(self, state) -> None:
        """Restore what get_extra_state saved (subclasses that save some define it)."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called: define "
                           "set_extra_state() in the module to load extra state")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not StateHooksMixin.get_extra_state
