"""NumPy's own OpenBLAS `cblas_sgemm`, as a ctypes function that compiled (Numba) loops can call.

A recurrence's time loop multiplies a small state by the same weight at every step: from Python each step
costs a NumPy call and a compiled call whose array arguments are unboxed again (about 20 us a step at an
LSTM of 32 x 128). Calling the GEMM from inside one compiled loop removes both. It is the very library
NumPy's matmul calls, with the same threads, so the products are NumPy's bit for bit.
"""

from __future__ import annotations

import ctypes

from ember.ops.batch_threads import _openblas_libraries

ROW_MAJOR, NO_TRANS = 101, 111  # CBLAS_ORDER and CBLAS_TRANSPOSE values

# (symbol, integer type): NumPy's wheels bundle an ILP64 OpenBLAS with suffixed names
_NAMES = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64))


def _find_sgemm():
    for lib in _openblas_libraries():
        for name, integer in _NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                p, i = ctypes.c_void_p, integer
                fn.restype = None
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, ctypes.c_float, p, i, p, i,
                               ctypes.c_float, p, i]
                return fn
    return None


# sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): C = alpha A B + beta C
# on float32 pointers (array.ctypes.data), or None where NumPy's BLAS is not a bundled OpenBLAS
sgemm = _find_sgemm()
