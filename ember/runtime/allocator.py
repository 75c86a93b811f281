"""A CPU caching allocator: size-class pools of raw blocks, reused when the arrays on them die.

NumPy allocates its own arrays; this pool serves the buffers the runtime allocates itself (plan
arenas, results of `out=` kernels, and eager op outputs when `set_eager_pool(True)`). An array
handed out is made with `np.frombuffer` over a fresh ctypes view of a block (the lease); NumPy
ends every view chain at the first base that is not an array, so all views of the array keep
the lease alive, and a weak reference to the lease returns the block to its size class once the
last view is gone. `stats()` reports allocated/reserved/peak bytes and counts; `empty_cache()` frees the
cached blocks.
"""

from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

from ember.interpreter import Interpreter, find, push, remove
from ember.kernels.background import compiles_here

_ALIGN = 64  # bytes: cache-line alignment, enough for every NumPy dtype and SIMD load
_MIN_BLOCK = 512


def size_class(nbytes: int) -> int:
    """The block size serving a request: 512-byte steps up to 8 KiB, then quarter-power-of-two steps."""
    if nbytes <= _MIN_BLOCK:
        return _MIN_BLOCK
    if nbytes <= 8192:
        return (nbytes + 511) & ~511
    step = 1 << (nbytes.bit_length() - 4)  # eight classes per doubling: at most 12.5% slack
    return (nbytes + step - 1) // step * step


class CachingAllocator:
    """Free lists of raw blocks keyed by size class, with usage statistics."""

    def __init__(self) -> None:
        self._free: dict = {}  # size class -> [(memory owner, aligned address)]
        self._leases: dict = {}  # id(weakref to a lease) -> (weakref, block, size class)
        self._lock = threading.Lock()
        self.allocated = 0  # bytes in blocks currently handed out
        self.reserved = 0  # bytes held: handed out + cached
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.n_allocs = 0
        self.n_hits = 0
        self.n_misses = 0
        self.n_frees = 0

    def _lease(self, nbytes: int):
        """A ctypes view of a block of at least nbytes; the block returns to the pool when it dies."""
        cls = size_class(max(int(nbytes), 1))
        with self._lock:
            self.n_allocs += 1
            blocks = self._free.get(cls)
            if blocks:
                block = blocks.pop()
                self.n_hits += 1
            else:
                block = None
                self.n_misses += 1
                self.reserved += cls
                if self.reserved > self.peak_reserved:
                    self.peak_reserved = self.reserved
            self.allocated += cls
            if self.allocated > self.peak_allocated:
                self.peak_allocated = self.allocated
        if block is None:
            block = _aligned_block(cls)
        ctype = _CTYPES.get(cls)
        if ctype is None:
            ctype = _CTYPES[cls] = ctypes.c_uint8 * cls
        lease = ctype.from_address(block[1])
        ref = weakref.ref(lease, self._release)
        self._leases[id(ref)] = (ref, block, cls)
        return lease

    def raw(self, nbytes: int) -> np.ndarray:
        """A 1-D uint8 array of at least nbytes bytes (64-byte aligned) that returns to the pool when it dies."""
        return np.frombuffer(self._lease(nbytes), np.uint8)

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised C-contiguous array carved from the pool."""
        dtype = np.dtype(dtype)
        n = 1
        for d in shape:
            n *= d
        return np.frombuffer(self._lease(n * dtype.itemsize), dtype, n).reshape(shape)

    def _release(self, ref) -> None:
        _, block, cls = self._leases.pop(id(ref))
        with self._lock:
            self.allocated -= cls
            self.n_frees += 1
            self._free.setdefault(cls, []).append(block)

    def empty_cache(self) -> int:
        """Drop every cached (unused) block; returns the bytes released."""
        with self._lock:
            freed = sum(cls * len(blocks) for cls, blocks in self._free.items())
            self._free.clear()
            self.reserved -= freed
        return freed

    def stats(self) -> dict:
        """Usage counters: bytes allocated/reserved (now and peak), allocations, cache hits, frees."""
        with self._lock:
            cached = sum(cls * len(blocks) for cls, blocks in self._free.items())
            return {
                "allocated_bytes": self.allocated,
                "reserved_bytes": self.reserved,
                "cached_bytes": cached,
                "peak_allocated_bytes": self.peak_allocated,
                "peak_reserved_bytes": self.peak_reserved,
                "num_allocs": self.n_allocs,
                "num_cache_hits": self.n_hits,
                "num_cache_misses": self.n_misses,
                "num_frees": self.n_frees,
            }

    def reset_peak_stats(self) -> None:
        """Start peak tracking afresh from the current usage."""
        with self._lock:
            self.peak_allocated = self.allocated
            self.peak_reserved = self.reserved


def _aligned_block(nbytes: int) -> tuple:
    """(memory owner, aligned address) of a new block."""
    buf = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    addr = buf.ctypes.data
    return buf, addr + (-addr) % _ALIGN


_CTYPES: dict = {}  # size class -> ctypes array type


pool = CachingAllocator()


def empty(shape, dtype) -> np.ndarray:
    """An uninitialised array from the process-wide pool."""
    return pool.empty(shape, dtype)


def stats() -> dict:
    """Counters of the process-wide pool (see `CachingAllocator.stats`)."""
    return pool.stats()


def empty_cache() -> int:
    """Release the process-wide pool's cached blocks; returns the bytes released."""
    return pool.empty_cache()


def reset_peak_stats() -> None:
    """Reset the peak counters of the process-wide pool."""
    pool.reset_peak_stats()


class EagerPoolInterpreter(Interpreter):
    """Eager execution whose large results are carved from the pool through the ops' `out=` kernels."""

    def run(self, op, inputs, arrays, attrs, device):
        backend = device._backend or device.backend
        if backend.direct and not backend.abstract and op.n_outputs == 1:
            out = _pooled(op, arrays, attrs)
            if out is not None:
                return out
        return self.below.run(op, inputs, arrays, attrs, device)


# Below this operand size NumPy's own allocation is cheaper than a trip to the pool. The pool pays off
# for big arrays, which glibc maps fresh (pages fault on first touch) instead of reusing freed memory.
EAGER_POOL_MIN_BYTES = 8 << 20


@compiles_here
def _pooled(op, arrays, attrs):
    """The op's result computed into an array from the caching pool (None: no out= kernel fits)."""
    fn = op.kernel_out
    if fn is None or max((getattr(a, "nbytes", 0) for a in arrays), default=0) < EAGER_POOL_MIN_BYTES:
        return None
    try:
        spec = op.infer(*arrays, **attrs)
    except Exception:  # noqa: BLE001 - the ordinary kernel call reports the problem
        return None
    if any(d is None for d in spec.shape):
        return None
    return fn(np, *arrays, out=empty(spec.shape, spec.dtype), **attrs)


_POOL = EagerPoolInterpreter()


def set_eager_pool(enabled: bool) -> None:
    """Carve this thread's eager op outputs from the pool (through `out=` kernels) instead of fresh NumPy arrays."""
    on = find(EagerPoolInterpreter) is not None
    if enabled and not on:
        push(_POOL)
    elif not enabled and on:
        remove(_POOL)


def eager_pool_enabled() -> bool:
    """Whether this thread's eager op outputs come from the pool."""
    return find(EagerPoolInterpreter) is not None
