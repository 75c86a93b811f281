"""Matrix product and inverse/determinant methods (x.mm(y) is ember.mm(x, y), x.det() is ember.det(x))."""

from __future__ import annotations

import ember


class LinalgMixin:
    """Matrix product and inverse/determinant methods of `ember.Tensor`."""

    __slots__ = ()

    def matmul(self, *args, **kwargs):
        """`ember.matmul(self, ...)`."""
        return ember.ops.matmul(self, *args, **kwargs)

    def mm(self, *args, **kwargs):
        """`ember.mm(self, ...)`."""
        return ember.ops.mm(self, *args, **kwargs)

    def bmm(self, *args, **kwargs):
        """`ember.bmm(self, ...)`."""
        return ember.ops.bmm(self, *args, **kwargs)

    def dot(self, *args, **kwargs):
        """`ember.dot(self, ...)`."""
        return ember.ops.dot(self, *args, **kwargs)

    def mv(self, *args, **kwargs):
        """`ember.mv(self, ...)`."""
        return ember.ops.mv(self, *args, **kwargs)

    def outer(self, *args, **kwargs):
        """`ember.outer(self, ...)`."""
        return ember.ops.outer(self, *args, **kwargs)

    def inner(self, *args, **kwargs):
        """`ember.inner(self, ...)`."""
        return ember.ops.inner(self, *args, **kwargs)

    def inverse(self):
        """`ember.inverse(self)`."""
        return ember.ops.inverse(self)

    def det(self):
        """`ember.det(self)`."""
        return ember.ops.det(self)

    def logdet(self):
        """`ember.logdet(self)`."""
        return ember.ops.logdet(self)

    def slogdet(self):
        """`ember.slogdet(self)`."""
        return ember.ops.slogdet(self)

    def pinverse(self, *args, **kwargs):
        """`ember.pinverse(self, ...)`."""
        return ember.ops.pinverse(self, *args, **kwargs)
