"""`RemovableHandle`: what registering a hook returns; `remove()` unregisters it (defined with autograd's hooks)."""

from ember.autograd.hooks import RemovableHandle

__all__ = ["RemovableHandle"]
