"""Reductions, scans, sorting and softmax methods (x.sum() is ember.sum(x))."""

from __future__ import annotations

import ember


class ReductionMixin:
    """Reductions, scans, sorting and softmax methods of `ember.Tensor`."""

    __slots__ = ()

    def sum(self, *args, **kwargs):
        """`ember.sum(self, ...)`."""
        return ember.ops.sum(self, *args, **kwargs)

    def mean(self, *args, **kwargs):
        """`ember.mean(self, ...)`."""
        return ember.ops.mean(self, *args, **kwargs)

    def prod(self, *args, **kwargs):
        """`ember.prod(self, ...)`."""
        return ember.ops.prod(self, *args, **kwargs)

    def max(self, *args, **kwargs):
        """`ember.max(self, ...)`."""
        return ember.ops.max(self, *args, **kwargs)

    def min(self, *args, **kwargs):
        """`ember.min(self, ...)`."""
        return ember.ops.min(self, *args, **kwargs)

    def amax(self, *args, **kwargs):
        """`ember.amax(self, ...)`."""
        return ember.ops.amax(self, *args, **kwargs)

    def amin(self, *args, **kwargs):
        """`ember.amin(self, ...)`."""
        return ember.ops.amin(self, *args, **kwargs)

    def argmax(self, *args, **kwargs):
        """`ember.argmax(self, ...)`."""
        return ember.ops.argmax(self, *args, **kwargs)

    def argmin(self, *args, **kwargs):
        """`ember.argmin(self, ...)`."""
        return ember.ops.argmin(self, *args, **kwargs)

    def var(self, *args, **kwargs):
        """`ember.var(self, ...)`."""
        return ember.ops.var(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        """`ember.std(self, ...)`."""
        return ember.ops.std(self, *args, **kwargs)

    def logsumexp(self, *args, **kwargs):
        """`ember.logsumexp(self, ...)`."""
        return ember.ops.logsumexp(self, *args, **kwargs)

    def all(self, *args, **kwargs):
        """`ember.all(self, ...)`."""
        return ember.ops.all(self, *args, **kwargs)

    def any(self, *args, **kwargs):
        """`ember.any(self, ...)`."""
        return ember.ops.any(self, *args, **kwargs)

    def norm(self, *args, **kwargs):
        """`ember.norm(self, ...)`."""
        return ember.ops.norm(self, *args, **kwargs)

    def count_nonzero(self, *args, **kwargs):
        """`ember.count_nonzero(self, ...)`."""
        return ember.ops.count_nonzero(self, *args, **kwargs)

    def softmax(self, *args, **kwargs):
        """`ember.softmax(self, ...)`."""
        return ember.ops.softmax(self, *args, **kwargs)

    def log_softmax(self, *args, **kwargs):
        """`ember.log_softmax(self, ...)`."""
        return ember.ops.log_softmax(self, *args, **kwargs)

    def cumsum(self, *args, **kwargs):
        """`ember.cumsum(self, ...)`."""
        return ember.ops.cumsum(self, *args, **kwargs)

    def cumprod(self, *args, **kwargs):
        """`ember.cumprod(self, ...)`."""
        return ember.ops.cumprod(self, *args, **kwargs)

    def sort(self, *args, **kwargs):
        """`ember.sort(self, ...)`."""
        return ember.ops.sort(self, *args, **kwargs)

    def argsort(self, *args, **kwargs):
        """`ember.argsort(self, ...)`."""
        return ember.ops.argsort(self, *args, **kwargs)

    def topk(self, *args, **kwargs):
        """`ember.topk(self, ...)`."""
        return ember.ops.topk(self, *args, **kwargs)

    def kthvalue(self, *args, **kwargs):
        """`ember.kthvalue(self, ...)`."""
        return ember.ops.kthvalue(self, *args, **kwargs)

    def msort(self, *args, **kwargs):
        """`ember.msort(self, ...)`."""
        return ember.ops.msort(self, *args, **kwargs)
