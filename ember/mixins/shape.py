"""Shape and layout methods: views, reshapes, permutations, splits (x.view(...) is ember.view(x, ...))."""

from __future__ import annotations

import ember


class ShapeMixin:
    """Shape and layout methods: views, reshapes, permutations, splits of `ember.Tensor`."""

    __slots__ = ()

    def reshape(self, *args, **kwargs):
        """`ember.reshape(self, ...)`."""
        return ember.ops.reshape(self, *args, **kwargs)

    def view(self, *args, **kwargs):
        """`ember.view(self, ...)`."""
        return ember.ops.view(self, *args, **kwargs)

    def flatten(self, *args, **kwargs):
        """`ember.flatten(self, ...)`."""
        return ember.ops.flatten(self, *args, **kwargs)

    def unflatten(self, *args, **kwargs):
        """`ember.unflatten(self, ...)`."""
        return ember.ops.unflatten(self, *args, **kwargs)

    def permute(self, *args, **kwargs):
        """`ember.permute(self, ...)`."""
        return ember.ops.permute(self, *args, **kwargs)

    def transpose(self, *args, **kwargs):
        """`ember.transpose(self, ...)`."""
        return ember.ops.transpose(self, *args, **kwargs)

    def t(self, *args, **kwargs):
        """`ember.t(self, ...)`."""
        return ember.ops.t(self, *args, **kwargs)

    def squeeze(self, *args, **kwargs):
        """`ember.squeeze(self, ...)`."""
        return ember.ops.squeeze(self, *args, **kwargs)

    def unsqueeze(self, *args, **kwargs):
        """`ember.unsqueeze(self, ...)`."""
        return ember.ops.unsqueeze(self, *args, **kwargs)

    def expand(self, *args, **kwargs):
        """`ember.expand(self, ...)`."""
        return ember.ops.expand(self, *args, **kwargs)

    def expand_as(self, *args, **kwargs):
        """`ember.expand_as(self, ...)`."""
        return ember.ops.expand_as(self, *args, **kwargs)

    def repeat(self, *args, **kwargs):
        """`ember.repeat(self, ...)`."""
        return ember.ops.repeat(self, *args, **kwargs)

    def tile(self, *args, **kwargs):
        """`ember.tile(self, ...)`."""
        return ember.ops.tile(self, *args, **kwargs)

    def flip(self, *args, **kwargs):
        """`ember.flip(self, ...)`."""
        return ember.ops.flip(self, *args, **kwargs)

    def fliplr(self, *args, **kwargs):
        """`ember.fliplr(self, ...)`."""
        return ember.ops.fliplr(self, *args, **kwargs)

    def flipud(self, *args, **kwargs):
        """`ember.flipud(self, ...)`."""
        return ember.ops.flipud(self, *args, **kwargs)

    def roll(self, *args, **kwargs):
        """`ember.roll(self, ...)`."""
        return ember.ops.roll(self, *args, **kwargs)

    def tril(self, *args, **kwargs):
        """`ember.tril(self, ...)`."""
        return ember.ops.tril(self, *args, **kwargs)

    def triu(self, *args, **kwargs):
        """`ember.triu(self, ...)`."""
        return ember.ops.triu(self, *args, **kwargs)

    def narrow(self, *args, **kwargs):
        """`ember.narrow(self, ...)`."""
        return ember.ops.narrow(self, *args, **kwargs)

    def split(self, *args, **kwargs):
        """`ember.split(self, ...)`."""
        return ember.ops.split(self, *args, **kwargs)

    def chunk(self, *args, **kwargs):
        """`ember.chunk(self, ...)`."""
        return ember.ops.chunk(self, *args, **kwargs)

    def unbind(self, *args, **kwargs):
        """`ember.unbind(self, ...)`."""
        return ember.ops.unbind(self, *args, **kwargs)

    def movedim(self, *args, **kwargs):
        """`ember.movedim(self, ...)`."""
        return ember.ops.movedim(self, *args, **kwargs)

    def moveaxis(self, *args, **kwargs):
        """`ember.moveaxis(self, ...)`."""
        return ember.ops.moveaxis(self, *args, **kwargs)

    def swapaxes(self, *args, **kwargs):
        """`ember.swapaxes(self, ...)`."""
        return ember.ops.swapaxes(self, *args, **kwargs)

    def swapdims(self, *args, **kwargs):
        """`ember.swapdims(self, ...)`."""
        return ember.ops.swapdims(self, *args, **kwargs)

    def contiguous(self, *args, **kwargs):
        """`ember.contiguous(self, ...)`."""
        return ember.ops.contiguous(self, *args, **kwargs)

    def clone(self, *args, **kwargs):
        """`ember.clone(self, ...)`."""
        return ember.ops.clone(self, *args, **kwargs)

    def sum_to_size(self, *args, **kwargs):
        """`ember.sum_to_size(self, ...)`."""
        return ember.ops.sum_to_size(self, *args, **kwargs)

    def diagonal(self, *args, **kwargs):
        """`ember.diagonal(self, ...)`."""
        return ember.ops.diagonal(self, *args, **kwargs)

    def broadcast_to(self, *args, **kwargs):
        """`ember.broadcast_to(self, ...)`."""
        return ember.ops.broadcast_to(self, *args, **kwargs)

    def view_as(self, other):
        """A view with `other`'s shape."""
        return ember.ops.view(self, tuple(other.shape))

    def reshape_as(self, other):
        """Reshaped to `other`'s shape."""
        return ember.ops.reshape(self, tuple(other.shape))

    def ravel(self):
        """The tensor flattened to 1-D (a view where possible)."""
        return ember.ops.reshape(self, (-1,))
