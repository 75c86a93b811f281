"""Compiling kernels with Numba (the `jit` extra): whether it is there and allowed, and the one way a kernel's
source becomes a compiled function, cached on disk in the folder `cache` has checked.

Hand-written kernels (convolution, pooling, batch norm, recurrences, ...) each have a NumPy fallback: a kernel
runs only on NumPy arrays of float32/float64, above a size where the call's fixed cost is repaid, when Numba is
installed and the `kernels` setting (EMBER_FUSION_BACKEND) is not `numpy`; otherwise `kernel_for` answers None
and the op runs its NumPy path, which gives the same values. The graph's fused regions are compiled here too
(`jitted`).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from ember import config
from ember.kernels import background, cache

MIN_ELEMENTS = 1 << 14  # below this a compiled call's fixed cost is not repaid

_cached: dict = {}
_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
_available: list = []
_jit_lock = threading.Lock()


def numba_available() -> bool:
    """Whether Numba imports here (decided once; a broken install counts as missing)."""
    if not _available:
        try:
            import numba  # noqa: F401
        except Exception:  # noqa: BLE001 - missing or broken: every kernel has its NumPy path
            _available.append(False)
        else:
            _available.append(True)
    return _available[0]


def compiled_allowed() -> bool:
    """Whether compiled kernels may run: Numba is there and the kernels setting is not `numpy`."""
    return config.KERNELS.get() != "numpy" and numba_available()


def kernel_for(source: str, name: str, xp, dtype, elements: int, fastmath=None, cache: bool = True):
    """The compiled function `name` of `source` for `elements` values of `dtype`, or None to use NumPy.

    `fastmath` (a set of LLVM flags such as {"reassoc"}) goes to Numba for kernels whose sums may be
    reordered; `cache=False` for kernels Numba cannot keep on disk (they call a ctypes function, whose
    address differs from process to process)."""
    if xp is not np or elements < MIN_ELEMENTS or (
            dtype is not _FLOAT32 and dtype is not _FLOAT64 and dtype not in (np.float32, np.float64)):
        return None  # (the identity tests first: comparing a dtype with a scalar type costs 0.1-0.2 us)
    if config.KERNELS.get() == "numpy" or background.numpy_only():
        return None
    key = (source, name)
    fn = _cached.get(key, _cached)
    if fn is _cached:
        fn = compile_source(source, name, fastmath, cache)
        fn = _cached[key] = None if fn is None else background.defer(fn)
    return fn


def compile_source(source: str, name: str, fastmath=None, cache: bool = True, signature=None):
    """The Numba function `name` of kernel `source` (nogil, cached on disk unless `cache=False`; compiled now for
    `signature` alone when given), or None where Numba is missing."""
    if not numba_available():
        return None
    # Serial: Numba's worker threads and OpenBLAS's (spinning after each GEMM) would fight over the cores.
    options = {"fastmath": fastmath} if fastmath else {}
    if signature is not None:
        options["signature_or_function"] = signature
    return compiled_function(source, name, cache=cache, **options)


def numba_cache_path(module) -> str | None:
    """The `__pycache__` Numba should cache `module`'s kernel in, or None when its cache must stay off."""
    from numba.core import config as numba_config

    if getattr(module, "__file__", None) is None:
        return None  # no checked folder: the kernel lives in memory only
    if getattr(numba_config, "CACHE_DIR", "") or getattr(numba_config, "CACHE_LOCATOR_CLASSES", ""):
        return None  # Numba would read its cache from a folder Ember has not checked
    return os.path.join(os.path.dirname(module.__file__), "__pycache__")


def jitted(text: str):
    """The Numba dispatcher of the function `kernel` in generated source `text`, shared by every caller of it."""
    from numba import njit

    module = cache.load_source(text)
    with _jit_lock:
        fn = module.__dict__.get("jitted_kernel")
        if fn is None:
            path = numba_cache_path(module)
            fn = njit(cache=path is not None, error_model="numpy", nogil=True)(module.kernel)
            if path is not None and fn.stats.cache_path != path:
                fn.disable_caching()  # a locator picked another folder: never load index files from there
            module.jitted_kernel = background.gated(fn)
        return fn


def compiled_function(text: str, name: str, **options):
    """The Numba dispatcher of function `name` in `text` (hand-written kernel source, e.g. im2col), compiled
    and cached on disk like the generated ones (unless `cache=False`); `options` go to `numba.njit`. With a
    `signature_or_function` it is compiled now, for that signature alone (in the background, with NotCompiledYet
    raised here, where an op is served while kernels compile and the signature is not on disk)."""
    from numba import njit

    module = cache.load_source(text)
    attr = f"jitted_{name}"
    fn = module.__dict__.get(attr)
    if fn is not None:
        return fn
    signature = options.pop("signature_or_function", None)
    if signature is not None and background.served() and (background.compiling((module.__name__, name)) or
                                                           not background.function_loadable(module.__dict__[name],
                                                                                             signature)):
        again = dict(options, signature_or_function=signature)
        background.serve_or_compile((module.__name__, name), lambda: compiled_function(text, name, **again),
                                    cost=background.compile_cost(module.__dict__[name]))
    with _jit_lock:  # one lock a function: a compile in the background holds up only callers of the same one
        lock = _function_locks.setdefault((module.__name__, name), threading.Lock())
    with lock:
        fn = module.__dict__.get(attr)
        if fn is None:
            path = numba_cache_path(module) if options.pop("cache", True) else None
            # NumPy's error model: x / 0 is inf, not a ZeroDivisionError check that stops vectorising
            options = {"error_model": "numpy", **options}
            fn = background.gated(njit(cache=path is not None, nogil=True, **options)(module.__dict__[name]))
            if path is not None and fn.stats.cache_path != path:
                fn.disable_caching()
            if signature is not None:  # as numba.njit(signature) does: that signature alone
                fn.compile(signature)
                fn.disable_compile()
            module.__dict__[attr] = fn
        return fn


_function_locks: dict = {}


_seen: dict = {}  # id(dispatcher) -> (hits, misses) already counted


def count_compiles(fn) -> None:
    """Add a dispatcher's new disk-cache hits and compilations to `cache.stats`."""
    hits, misses = sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values())
    old_hits, old_misses = _seen.get(id(fn), (0, 0))
    cache.stats["numba_cache_hits"] += hits - old_hits
    cache.stats["numba_compiled"] += misses - old_misses
    _seen[id(fn)] = (hits, misses)


def contiguous(a, shape=(-1,)):
    """`a` as a C-contiguous array of `shape` (flat by default), copied only when its layout needs it."""
    return np.ascontiguousarray(a).reshape(shape)
