"""Shape and layout methods: views, reshapes, permutations, splits (x.view(...) is ember.view(x, ...))."""

from __future__ import annotations

from ember import ops
from ember.mixins.op_method import op_method


class ShapeMixin:
    """Shape and layout methods: views, reshapes, permutations, splits of `ember.Tensor`."""

    __slots__ = ()

    reshape = op_method()
    view = op_method()
    flatten = op_method()
    unflatten = op_method()
    permute = op_method()
    transpose = op_method()
    t = op_method()
    squeeze = op_method()
    unsqueeze = op_method()
    expand = op_method()
    expand_as = op_method()
    repeat = op_method()
    tile = op_method()
    flip = op_method()
    fliplr = op_method()
    flipud = op_method()
    roll = op_method()
    tril = op_method()
    triu = op_method()
    narrow = op_method()
    select = op_method()
    split = op_method()
    chunk = op_method()
    tensor_split = op_method()
    unbind = op_method()
    movedim = op_method()
    moveaxis = op_method()
    swapaxes = op_method()
    swapdims = op_method()
    contiguous = op_method()
    clone = op_method()
    sum_to_size = op_method()
    diagonal = op_method()
    broadcast_to = op_method()
    diag = op_method()
    diag_embed = op_method()
    diagflat = op_method()
    kron = op_method()
    rot90 = op_method()
    repeat_interleave = op_method()
    diff = op_method()

    def view_as(self, other):
        """A view with `other`'s shape."""
        return ops.view(self, tuple(other.shape))

    def reshape_as(self, other):
        """Reshaped to `other`'s shape."""
        return ops.reshape(self, tuple(other.shape))

    def ravel(self):
        """The tensor flattened to 1-D (a view where possible)."""
        return ops.reshape(self, (-1,))
