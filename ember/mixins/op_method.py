"""`op_method`: a Tensor method that is an op function taking the tensor first (`x.exp()` is `ember.exp(x)`)."""

from __future__ import annotations


class op_method:  # noqa: N801 - used like a decorator-made attribute: `exp = op_method()`
    """Marks a mixin attribute as the op function `ember.ops.<its name>`: `install` puts that function itself on
    the class, so `x.exp()` is a plain method call of `ember.exp` (a forwarding function cost 0.15-0.3 us a call)."""
