"""A process-wide count of changes to any Module's structure, so `ember.jit` need not rebuild its key each call;
and which class is a module (ember.nn registers nn.Module, which lives in a layer above the jit).

A jitted function's program depends on the modules it reaches: their classes, Python-scalar attributes
(training, p, eps, ...), which parameters, buffers, children and hooks they hold (graph/jit_key.py).
Reading all that costs 2-3 us per module, a tenth of a small network's jitted step. Instead every
change counts here: Module.__init__, __setattr__, __delattr__ and __setstate__ call `changed()`, and
the stores (_parameters, _buffers, _modules and the hook dicts) are `TrackedDict`s, which count each of
their own changes. While the count stands still, and the same module objects are reached (a new module's
__init__ counts too, so no new object can take a dead one's id unnoticed), the key last read still holds.
Writing a module's __dict__ directly bypasses this; Ember's own modules never do.
"""

from __future__ import annotations

from collections import OrderedDict

_count = [0]
_module_class: list = []  # [nn.Module] once ember.nn is imported


def register_module_class(cls: type) -> None:
    """Make `cls` (nn.Module) the class whose instances a jitted function is keyed on (graph/jit_key.py)."""
    _module_class[:] = [cls]


def module_class() -> type | None:
    """nn.Module, or None when ember.nn was never imported (then no object is a module)."""
    return _module_class[0] if _module_class else None


def changed() -> None:
    """Count one change to some module's structure."""
    _count[0] += 1


def version() -> int:
    """The number of module-structure changes so far in this process."""
    return _count[0]


def _counting(method):
    def wrapper(self, *args, **kwargs):
        _count[0] += 1
        return method(self, *args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


_MUTATORS = ("__setitem__", "__delitem__", "__ior__", "pop", "popitem", "clear", "update", "setdefault")


class TrackedDict(dict):
    """A dict whose every change counts as a change of module structure (pickled and copied as one)."""


class TrackedOrderedDict(OrderedDict):
    """An OrderedDict (hook order matters) whose every change counts as a change of module structure."""


for _name in _MUTATORS:
    setattr(TrackedDict, _name, _counting(getattr(dict, _name)))
for _name in _MUTATORS + ("move_to_end",):
    setattr(TrackedOrderedDict, _name, _counting(getattr(OrderedDict, _name)))


def tracked(store, ordered: bool):
    """`store` as a TrackedOrderedDict (`ordered`) or TrackedDict, the same object if it already is one."""
    kind = TrackedOrderedDict if ordered else TrackedDict
    return store if type(store) is kind else kind(store)
