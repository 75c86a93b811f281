"""Hand-written Numba kernels for eager ops (im2col, col2im, pooling), each with a NumPy fallback.

A kernel runs only on NumPy arrays of float32/float64, above a size where the call's fixed cost is
repaid, when Numba is installed (the `jit` extra) and EMBER_FUSION_BACKEND is not `numpy`; otherwise
`kernel_for` answers None and the op runs its NumPy path, which gives the same values.
"""

from __future__ import annotations

import numpy as np

MIN_ELEMENTS = 1 << 14  # below this a compiled call's fixed cost is not repaid

_cached: dict = {}


def kernel_for(source: str, name: str, xp, dtype, elements: int):
    """The compiled function `name` of `source` for `elements` values of `dtype`, or None to use NumPy."""
    if xp is not np or dtype not in (np.float32, np.float64) or elements < MIN_ELEMENTS:
        return None
    from ember.graph.codegen import get_backend

    if get_backend() == "numpy":
        return None
    key = (source, name)
    if key not in _cached:
        _cached[key] = _compile(source, name)
    return _cached[key]


def _compile(source: str, name: str):
    from ember.graph.codegen.numba_cpu import NumbaRenderer, compiled_function

    if not NumbaRenderer().available():
        return None
    # Serial: Numba's worker threads and OpenBLAS's (spinning after each GEMM) would fight over the cores.
    return compiled_function(source, name)
