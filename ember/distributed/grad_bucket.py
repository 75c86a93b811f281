"""`GradBucket`: what a DDP communication hook receives (PyTorch's dist.GradBucket).

One bucket of DistributedDataParallel's gradient reduction: its flat buffer (the gradients of its
parameters, concatenated, not yet averaged), its index, and its parameters. A hook
(`DistributedDataParallel.register_comm_hook`) returns a Future whose value is the averaged buffer.
"""

from __future__ import annotations


class GradBucket:
    """A flat buffer of gradients and the parameters they belong to."""

    def __init__(self, index: int, buffer, params: list, offsets: list, last: bool) -> None:
        self._index = index
        self._buffer = buffer
        self._params = list(params)
        self._offsets = list(offsets)
        self._last = last

    def index(self) -> int:
        """The bucket's position among the buckets (0 first: the first reduced)."""
        return self._index

    def buffer(self):
        """The flat gradient buffer (a 1-d tensor): the hook may change it in place."""
        return self._buffer

    def set_buffer(self, tensor) -> None:
        """Replace the buffer (a hook wrapper passes a cast copy to the hook it wraps)."""
        self._buffer = tensor

    def gradients(self) -> list:
        """The gradients in the buffer, each a view shaped like its parameter."""
        return [self._buffer[off:off + p.numel()].reshape(p.shape) for p, off in zip(self._params, self._offsets)]

    def parameters(self) -> list:
        """The parameters whose gradients the bucket holds, in buffer order."""
        return list(self._params)

    def is_last(self) -> bool:
        """Whether this is the last bucket of the backward pass."""
        return self._last

    def __repr__(self) -> str:
        return f"<GradBucket {self._index}: {len(self._params)} parameters, {self._buffer.numel()} elements>"
