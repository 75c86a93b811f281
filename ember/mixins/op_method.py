"""`op_method`: a Tensor method that is an op function taking the tensor first (`x.exp()` is `ember.exp(x)`)."""

from __future__ import annotations


class op_method:  # noqa: N801 - used like a decorator-made attribute: `exp = op_method()`
    """The op function `ember.ops.<name>` as a method of the class it is assigned in.

    The mixin modules are imported before the ops (which are built on `Tensor`), so the function is
    looked up on first use. That lookup then puts the function itself on the class in place of this
    descriptor: every later `x.exp()` is a plain method call of `ember.exp`, with no forwarding
    function between the caller and the op (a forwarding layer cost 0.15-0.3 us a call).
    """

    def __set_name__(self, owner, name: str) -> None:
        self._owner = owner
        self._name = name

    def __get__(self, obj, cls=None):
        import ember.ops

        fn = getattr(ember.ops, self._name)
        setattr(self._owner, self._name, fn)
        return fn if obj is None else fn.__get__(obj, cls)
