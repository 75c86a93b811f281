"""Loading hand-written Numba kernels for eager ops (convolution, pooling, batch norm, recurrences,
optimizer updates), each of which has a NumPy fallback.

A kernel runs only on NumPy arrays of float32/float64, above a size where the call's fixed cost is
repaid, when Numba is installed (the `jit` extra) and EMBER_FUSION_BACKEND is not `numpy`; otherwise
`kernel_for` answers None and the op runs its NumPy path, which gives the same values.
"""

from __future__ import annotations

import numpy as np

MIN_ELEMENTS = 1 << 14  # below this a compiled call's fixed cost is not repaid

_cached: dict = {}


def kernel_for(source: str, name: str, xp, dtype, elements: int, fastmath=None, cache: bool = True):
    """The compiled function `name` of `source` for `elements` values of `dtype`, or None to use NumPy.

    `fastmath` (a set of LLVM flags such as {"reassoc"}) goes to Numba for kernels whose sums may be
    reordered; `cache=False` for kernels Numba cannot keep on disk (they call a ctypes function, whose
    address differs from process to process)."""
    if xp is not np or dtype not in (np.float32, np.float64) or elements < MIN_ELEMENTS:
        return None
    from ember.graph.codegen import get_backend

    if get_backend() == "numpy":
        return None
    key = (source, name)
    if key not in _cached:
        _cached[key] = compile_source(source, name, fastmath, cache)
    return _cached[key]


def compile_source(source: str, name: str, fastmath=None, cache: bool = True, signature=None):
    """The Numba function `name` of kernel `source` (nogil, cached on disk unless `cache=False`; compiled now for
    `signature` alone when given), or None where Numba is missing."""
    from ember.graph.codegen.numba_cpu import NumbaRenderer, compiled_function

    if not NumbaRenderer().available():
        return None
    # Serial: Numba's worker threads and OpenBLAS's (spinning after each GEMM) would fight over the cores.
    options = {"fastmath": fastmath} if fastmath else {}
    if signature is not None:
        options["signature_or_function"] = signature
    return compiled_function(source, name, cache=cache, **options)


def contiguous(a, shape=(-1,)):
    """`a` as a C-contiguous array of `shape` (flat by default), copied only when its layout needs it."""
    return np.ascontiguousarray(a).reshape(shape)
