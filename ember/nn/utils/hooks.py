"""`RemovableHandle`: what registering a hook returns; `remove()` unregisters it."""

from __future__ import annotations

import weakref


class RemovableHandle:
    """A handle that removes one hook from the dicts it was registered in (also a context manager)."""

    _next_id = 0

    def __init__(self, hooks_dict: dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        extras = [] if extra_dict is None else (extra_dict if isinstance(extra_dict, list) else [extra_dict])
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
