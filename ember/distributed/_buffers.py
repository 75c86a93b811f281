"""The arrays behind tensors for a collective: checked, zero-copy on the CPU, staged through the host elsewhere."""

from __future__ import annotations

import numpy as np

from ember import config, dispatch
from ember.backends.meta import MetaArray
from ember.tensor import Tensor


def cuda_aware() -> bool:
    """Whether MPI may read device memory directly ($EMBER_MPI_CUDA_AWARE=1 for a CUDA-aware MPI)."""
    return config.get("mpi_cuda_aware")


def in_graph(t) -> bool:
    """Whether a collective on `t` builds a graph node (ember.jit is tracing, or t is a graph tensor)."""
    if dispatch.is_tracing():
        return True
    data = getattr(t, "_data", None)
    return isinstance(data, MetaArray) and data.symbolic


class Buffer:
    """One tensor's memory for MPI: `array` (the tensor's own NumPy storage on the CPU) and, for a
    tensor staged through the host, `done()` copies the host array back."""

    __slots__ = ("tensor", "array", "_staged")

    def __init__(self, tensor: Tensor, array, staged: bool) -> None:
        self.tensor = tensor
        self.array = array
        self._staged = staged

    def done(self, written: bool = True) -> None:
        """After MPI wrote `array`: copy staged data back to the device and bump the tensor's version."""
        if not written:
            return
        t = self.tensor
        if self._staged:
            backend = t._device.backend
            backend.xp.copyto(t._data, backend.from_host(self.array))
        t._version[0] += 1


def buffer(t, what: str, arg: str, rank: int, *, write: bool) -> Buffer:
    """The Buffer of tensor `t` (argument `arg` of op `what`); clear errors for what MPI cannot use."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} on rank {rank}: {arg} must be a Tensor, got {type(t).__name__}")
    if write and not dispatch.eager_now():  # async eager: queued kernels that read t finish first
        from ember.runtime import engine

        engine.wait_for_all()
    data = t._data
    if type(data) is not np.ndarray:
        if getattr(type(data), "pending", False):
            t._require_data(what)
            data = t._data
        elif isinstance(data, MetaArray):
            raise ValueError(f"{what} on rank {rank}: {arg} is on the meta device, which has no data to send")
    if not getattr(data, "flags", None) or not data.flags.c_contiguous:
        raise ValueError(
            f"{what} on rank {rank}: {arg} must be contiguous (it has shape {tuple(t.shape)} and strides "
            f"{t.stride()}); pass tensor.contiguous() and copy the result back")
    if type(data) is np.ndarray:
        if write and not data.flags.writeable:
            raise ValueError(f"{what} on rank {rank}: {arg} is read-only (a broadcast view?); pass a copy")
        return Buffer(t, data, staged=False)
    if cuda_aware():
        return Buffer(t, data, staged=False)
    t._device.backend.synchronize()
    return Buffer(t, np.ascontiguousarray(t._device.backend.to_host(data)), staged=True)
