"""Gather/scatter and masked selection methods (x.gather(...) is ember.gather(x, ...))."""

from __future__ import annotations

import ember


class IndexingMixin:
    """Gather/scatter and masked selection methods of `ember.Tensor`."""

    __slots__ = ()

    def gather(self, *args, **kwargs):
        """`ember.gather(self, ...)`."""
        return ember.ops.gather(self, *args, **kwargs)

    def scatter(self, *args, **kwargs):
        """`ember.scatter(self, ...)`."""
        return ember.ops.scatter(self, *args, **kwargs)

    def scatter_add(self, *args, **kwargs):
        """`ember.scatter_add(self, ...)`."""
        return ember.ops.scatter_add(self, *args, **kwargs)

    def scatter_reduce(self, *args, **kwargs):
        """`ember.scatter_reduce(self, ...)`."""
        return ember.ops.scatter_reduce(self, *args, **kwargs)

    def index_reduce(self, *args, **kwargs):
        """`ember.index_reduce(self, ...)`."""
        return ember.ops.index_reduce(self, *args, **kwargs)

    def index_select(self, *args, **kwargs):
        """`ember.index_select(self, ...)`."""
        return ember.ops.index_select(self, *args, **kwargs)

    def index_add(self, *args, **kwargs):
        """`ember.index_add(self, ...)`."""
        return ember.ops.index_add(self, *args, **kwargs)

    def index_put(self, *args, **kwargs):
        """`ember.index_put(self, ...)`."""
        return ember.ops.index_put(self, *args, **kwargs)

    def masked_fill(self, *args, **kwargs):
        """`ember.masked_fill(self, ...)`."""
        return ember.ops.masked_fill(self, *args, **kwargs)

    def masked_select(self, *args, **kwargs):
        """`ember.masked_select(self, ...)`."""
        return ember.ops.masked_select(self, *args, **kwargs)

    def nonzero(self, *args, **kwargs):
        """`ember.nonzero(self, ...)`."""
        return ember.ops.nonzero(self, *args, **kwargs)

    def argwhere(self, *args, **kwargs):
        """`ember.argwhere(self, ...)`."""
        return ember.ops.argwhere(self, *args, **kwargs)

    def take_along_dim(self, *args, **kwargs):
        """`ember.take_along_dim(self, ...)`."""
        return ember.ops.take_along_dim(self, *args, **kwargs)
