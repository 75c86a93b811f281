"""`Module.compile()`: PyTorch's in-place form of `torch.compile(module)`.

PyTorch's `Module.compile(**kwargs)` compiles the module's `__call__` and keeps the module itself (its class, its
state-dict keys), where `torch.compile(module)` wraps it in an `OptimizedModule`. Here the module's class is swapped
for a subclass whose `__call__` runs the compiled call (PyTorch's parametrize design, as `nn.utils.parametrize`
does), so that modules never compiled pay nothing on their calls. The compiled function is made for the module it
belongs to and made again for a copy (`copy.deepcopy` copies the settings, not a function bound to the original).
"""

from __future__ import annotations

import functools


class CompileMixin:
    """`compile()` for `ember.nn.Module`."""

    __slots__ = ()

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls in place with `ember.compile(**kwargs)` (torch.nn.Module.compile)."""
        from ember.compiler import compile as compile_function

        if args:
            raise TypeError(f"compile() takes keyword arguments only (ember.compile's), got {len(args)} positional")
        base = _uncompiled_class(type(self))
        compile_function(lambda: None, **kwargs)  # the settings checked now, as PyTorch checks them here
        self.__dict__["_compile_settings"] = dict(kwargs)
        self.__dict__.pop("_compiled_for", None)
        self.__class__ = _compiled_class(base)


def _uncompiled_class(cls):
    return cls.__bases__[0] if cls.__dict__.get("_compiled_class") else cls


def _compiled_call(module):
    """The compiled `__call__` of `module`, made at its first call (and again for a copy of it)."""
    made = module.__dict__.get("_compiled_for")
    if made is None or made[0] != id(module):
        from ember.compiler import compile as compile_function

        base = _uncompiled_class(type(module))
        function = compile_function(lambda *a, **k: base.__call__(module, *a, **k),
                                    **module.__dict__["_compile_settings"])
        made = module.__dict__["_compiled_for"] = (id(module), function)
    return made[1]


@functools.cache
def _compiled_class(cls):
    """The subclass of `cls` whose instances run their compiled call."""

    def __call__(self, *args, **kwargs):
        return _compiled_call(self)(*args, **kwargs)

    return type(cls.__name__, (cls,), {"__call__": __call__, "_compiled_class": True, "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__})


__all__ = ["CompileMixin"]
