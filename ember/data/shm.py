"""Moving batches from worker processes to the main process: arrays through shared memory.

A worker copies every array (and tensor) of a batch into one shared-memory segment and sends only a
small pickled description through the result queue; the main process copies the arrays out and
unlinks the segment at once. Segment names start with a per-iterator prefix, so whatever a killed
worker left behind can be swept up by name.
"""

from __future__ import annotations

import os
import pickle
import secrets
from collections.abc import Callable, Mapping
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from ember.creation import from_numpy
from ember.tensor import Tensor

_ALIGN = 64
_SHM_DIR = "/dev/shm"


class _Ref:
    """Placeholder for an array in a shared-memory segment."""

    __slots__ = ("index", "tensor", "device", "requires_grad")

    def __init__(self, index: int, tensor: bool, device: str | None, requires_grad: bool) -> None:
        self.index = index
        self.tensor = tensor
        self.device = device
        self.requires_grad = requires_grad

    def __getstate__(self):
        return (self.index, self.tensor, self.device, self.requires_grad)

    def __setstate__(self, state) -> None:
        self.index, self.tensor, self.device, self.requires_grad = state


def _strip(data: Any, arrays: list) -> Any:
    """Replace arrays and tensors in a nested structure with _Ref placeholders."""
    if isinstance(data, Tensor):
        if data.device.type == "meta":
            return data
        arrays.append(np.asarray(data))
        dev = None if data.device.type == "cpu" else str(data.device)
        return _Ref(len(arrays) - 1, True, dev, data.requires_grad)
    if isinstance(data, np.ndarray) and not data.dtype.hasobject:
        arrays.append(data)
        return _Ref(len(arrays) - 1, False, None, False)
    if isinstance(data, Mapping):
        items = {k: _strip(v, arrays) for k, v in data.items()}
        try:
            return type(data)(items)
        except TypeError:
            return items
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_strip(x, arrays) for x in data))
    if isinstance(data, (tuple, list)):
        return type(data)(_strip(x, arrays) for x in data)
    return data


def _restore(data: Any, arrays: list) -> Any:
    if isinstance(data, _Ref):
        arr = arrays[data.index]
        if not data.tensor:
            return arr
        t = from_numpy(arr)
        if data.device is not None:
            t = t.to(data.device)
        return t.requires_grad_(True) if data.requires_grad else t
    if isinstance(data, Mapping):
        items = {k: _restore(v, arrays) for k, v in data.items()}
        try:
            return type(data)(items)
        except TypeError:
            return items
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_restore(x, arrays) for x in data))
    if isinstance(data, (tuple, list)):
        return type(data)(_restore(x, arrays) for x in data)
    return data


def _create(name_fn: Callable[[], str], size: int) -> shared_memory.SharedMemory:
    for _ in range(8):
        try:
            return shared_memory.SharedMemory(name=name_fn(), create=True, size=size)
        except FileExistsError:  # a stale segment from a dead process that had our pid: pick another name
            continue
    return shared_memory.SharedMemory(name=name_fn() + secrets.token_hex(4), create=True, size=size)


def _write(shm: shared_memory.SharedMemory, layout: list, arrays: list) -> None:
    for (offset, shape, dtype), arr in zip(layout, arrays):
        np.copyto(np.ndarray(shape, dtype, buffer=shm.buf, offset=offset), arr, casting="no")


def pack(idx: int, data: Any, name_fn: Callable[[], str]) -> bytes:
    """Serialise (idx, data): arrays into one new shared-memory segment, the rest pickled."""
    arrays: list = []
    struct = _strip(data, arrays)
    layout, end = [], 0
    for arr in arrays:
        offset = -(-end // _ALIGN) * _ALIGN
        layout.append((offset, arr.shape, arr.dtype))
        end = offset + arr.nbytes
    name = None
    if end:
        shm = _create(name_fn, end)
        name = shm.name
        try:
            _write(shm, layout, arrays)
            payload = pickle.dumps((idx, name, layout, struct), pickle.HIGHEST_PROTOCOL)
        except BaseException:
            _close(shm)
            _unlink(name)
            raise
        _close(shm)
        return payload
    return pickle.dumps((idx, None, layout, struct), pickle.HIGHEST_PROTOCOL)


def _read(name: str, layout: list) -> list:
    shm = shared_memory.SharedMemory(name=name)
    try:
        return [np.ndarray(shape, dtype, buffer=shm.buf, offset=offset).copy() for offset, shape, dtype in layout]
    finally:
        _close(shm)
        _unlink_handle(shm)


def unpack(payload: bytes) -> tuple[int, Any]:
    """(idx, data) from a packed payload; the shared-memory segment is freed."""
    idx, name, layout, struct = pickle.loads(payload)
    arrays = _read(name, layout) if name is not None else []
    return idx, _restore(struct, arrays)


def free(payload: bytes) -> None:
    """Release a payload's segment without reading it (for batches nobody will consume)."""
    try:
        _idx, name, _layout, _struct = pickle.loads(payload)
    except Exception:  # a payload that can't be read has nothing we could free anyway
        return
    if name is not None:
        _unlink(name)


def _close(shm: shared_memory.SharedMemory) -> None:
    try:
        shm.close()
    except BufferError:  # a view is still alive (only after an error); the mapping goes with it
        pass


def _unlink_handle(shm: shared_memory.SharedMemory) -> None:
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


def _unlink(name: str) -> None:
    """Unlink a segment by name (attaching first keeps Python's resource tracker balanced)."""
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    _close(shm)
    _unlink_handle(shm)


def sweep(prefix: str) -> list[str]:
    """Unlink every segment whose name starts with prefix (left by workers that were killed)."""
    if not os.path.isdir(_SHM_DIR):
        return []
    found = [n for n in os.listdir(_SHM_DIR) if n.startswith(prefix)]
    for name in found:
        _unlink(name)
    return found
