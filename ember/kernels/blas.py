"""NumPy's BLAS, as far as Ember drives it: which library and kernels it runs, its thread count, and its
`cblas_sgemm` as a ctypes function that compiled (Numba) loops can call.

A recurrence's time loop multiplies a small state by the same weight at every step: from Python each step
costs a NumPy call and a compiled call whose array arguments are unboxed again (about 20 us a step at an
LSTM of 32 x 128). Calling the GEMM from inside one compiled loop removes both. It is the very library
NumPy's matmul calls, with the same threads (the products equal NumPy's bit for bit where the calls have the
same shapes; `sgemm_rows` splits them, and OpenBLAS's Haswell kernels round a row differently by where it
falls in a call, so there they agree within rounding). `linear` also calls it to add its bias inside the GEMM
(linear_with_bias). Only NumPy's bundled OpenBLAS (the wheels') is driven; with another BLAS these answer None
and the NumPy paths run.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

from ember import config


@functools.cache
def _openblas_libraries() -> tuple:
    """NumPy's bundled OpenBLAS libraries, loaded (a wheel bundles one; none when NumPy uses another BLAS)."""
    found = []
    for path in glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            continue
    return tuple(found)


_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


@functools.cache
def _thread_controls():
    """(get, set) for NumPy's bundled OpenBLAS thread count, or None."""
    for lib in _openblas_libraries():
        for get_name, set_name in zip(_GETTERS, _SETTERS):
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                getter, setter = getattr(lib, get_name), getattr(lib, set_name)
                getter.restype = ctypes.c_int
                setter.argtypes = [ctypes.c_int]
                return getter, setter
    return None


def controllable() -> bool:
    """Whether NumPy's BLAS thread count can be read and set here."""
    return _thread_controls() is not None


def get_threads() -> int | None:
    """NumPy's OpenBLAS thread count, or None where it cannot be read."""
    controls = _thread_controls()
    return None if controls is None else controls[0]()


def set_threads(n: int) -> None:
    """Run NumPy's OpenBLAS on `n` threads (nothing where it cannot be set)."""
    controls = _thread_controls()
    if controls is not None:
        controls[1](n)


# After a multithreaded GEMM, OpenBLAS's idle threads spin (yielding) for 2^28 cycles, about 0.1 s, before they
# sleep. A split that follows a GEMM (attention after its projections, GELU after fc1, a convolution's
# backward after the classifier's) then shares its second core with a spinning thread: attention and GELU ran
# 1.5-2x slower in a transformer step than alone. 2^19 cycles (about 0.2 ms) still covers the gaps between
# the GEMMs of an LSTM's time loop, whose threads must stay awake (2^16 made that step 14% slower); measured
# in one process, a transformer step went from 32.5 to 28.5 ms, the LSTM's, MLPs' and CNNs' did not change.
SPIN_CYCLES_LOG2 = 19


def shorten_spin(log2_cycles: int = SPIN_CYCLES_LOG2, for_children: bool = True) -> bool:
    """Make NumPy's OpenBLAS threads sleep after 2**log2_cycles idle cycles, unless the user set
    OPENBLAS_THREAD_TIMEOUT; True if applied. OpenBLAS reads the setting when it starts its threads, so they are
    stopped here and start again at the next threaded call: call it while no thread is inside BLAS. With
    `for_children` the value is left in the environment, so that child processes start their OpenBLAS with it
    (tune_process); without, the environment is left as it was (Ember's thread pool as it starts: parallel.py)."""
    if config.outside("OPENBLAS_THREAD_TIMEOUT") not in (None, str(log2_cycles)):
        return False
    for lib in _openblas_libraries():
        if hasattr(lib, "openblas_read_env") and hasattr(lib, "blas_thread_shutdown_"):
            with config.outside_for_children({"OPENBLAS_THREAD_TIMEOUT": str(log2_cycles)}):
                lib.openblas_read_env()  # OpenBLAS keeps what it read; its threads start with it again below
            if for_children:
                config.set_outside("OPENBLAS_THREAD_TIMEOUT", str(log2_cycles))
            lib.blas_thread_shutdown_()
            return True
    return False


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

TRANS = 112

# OpenBLAS multiplies products of at most 10^6 multiply-adds (M * N * K) with its small-matrix kernels (on
# AVX-512 machines), which skip packing the operands: 12 x 128 x 512 ran at 106 GFLOP/s on one core and
# 16 x 128 x 512 (just above) at 62-72. `sgemm_rows` (compiled loops) keeps each call under it.
SMALL_GEMM_MAX = 1_000_000

# sgemm_rows(M, N, K, a, lda, b, ldb, c, ldc): C = A B for row-major float32 at addresses a, b, c (NO_TRANS
# both), in as few calls of evenly split rows as keep each call within SMALL_GEMM_MAX; source for kernels that
# paste it after their own imports (`njit`, `np`). sgemm_rows_packed: the name of Ember's driver's prepacked form
# (sgemm.ROWS_SOURCE), here reading b itself (OpenBLAS packs inside each call)
SGEMM_ROWS_SOURCE = f'''
from ember.kernels.blas import sgemm


@njit(inline="always")
def sgemm_rows(M, N, K, a, lda, b, ldb, c, ldc):
    per_call = {SMALL_GEMM_MAX} // max(N * K, 1)  # rows; none fit when N * K alone is over: one call
    calls = 1 if per_call == 0 or M <= per_call else (M + per_call - 1) // per_call
    for k in range(calls):
        r0 = M * k // calls
        r1 = M * (k + 1) // calls
        sgemm(101, 111, 111, r1 - r0, N, K, np.float32(1), a + np.uintp(r0 * lda * 4), lda, b, ldb, np.float32(0),
              c + np.uintp(r0 * ldc * 4), ldc)


@njit(inline="always")
def sgemm_rows_packed(M, N, K, a, lda, bp, b, ldb, c, ldc):
    sgemm_rows(M, N, K, a, lda, b, ldb, c, ldc)
'''

# From this many output values, adding the bias in its own pass costs more than prefilling the output with it
# (a 1600 x 512 LSTM input projection: 701 -> 584 us; 128 x 512 and smaller: no difference).
BIAS_PREFILL_MIN = 1 << 17


def linear_with_bias(x, w, b, out=None):
    """x @ w.T + b as PyTorch's addmm computes it: the output prefilled with the bias, then one GEMM adding into it
    (NumPy's sgemm with beta=1), with no separate pass adding the bias; where gemm.takes_own, Ember's kernel adds
    the bias as it stores the product, with the same bits and without the prefill (1600 x 64 by 64 x 512: 318 ->
    264-270 us). For float32 C-contiguous x (M, K), w (N, K), b (N,) (and `out` (M, N) when given) of at least
    BIAS_PREFILL_MIN output values: the result, else None (nothing written). Where gemm.takes_mkl, MKL's GEMM adds
    the product into the prefilled output instead of OpenBLAS's."""
    if (sgemm is None or x.ndim != 2 or w.ndim != 2 or x.shape[0] * w.shape[0] < BIAS_PREFILL_MIN or not x.shape[1]
            or not x.dtype == w.dtype == b.dtype == np.float32 or not (x.flags.c_contiguous and w.flags.c_contiguous)
            or (out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous))):
        return None
    (m, k), n = x.shape, w.shape[0]
    out = np.empty((m, n), np.float32) if out is None else out
    from ember.kernels import gemm  # (gemm imports this module's neighbours; blas stays import-light)

    if gemm.takes_mkl(x, w.T, out):  # the same prefill, MKL's GEMM adding into it
        out[...] = b
        from ember.kernels import mkl, selection

        if selection.listening[0]:
            selection.note("matmul", "mkl sgemm")
        return mkl.sgemm(x, w.T, out, beta=1.0)
    if gemm.takes_own(x, w.T, out):
        from ember.kernels.sgemm import sgemm as own_sgemm

        # the bias added as the micro-kernel stores the product: the prefilled output's bits, one pass fewer
        return own_sgemm(x, w.T, out, bias=b)
    out[...] = b
    sgemm(ROW_MAJOR, NO_TRANS, TRANS, m, n, k, np.float32(1), x.ctypes.data, k, w.ctypes.data, k, np.float32(1),
          out.ctypes.data, n)
    return out


def _openblas_info():
    """(config, corename) strings of NumPy's bundled OpenBLAS, or None where NumPy's BLAS is another."""
    for lib in _openblas_libraries():
        for config_name, core_name in (("scipy_openblas_get_config64_", "scipy_openblas_get_corename64_"),
                                       ("openblas_get_config64_", "openblas_get_corename64_"),
                                       ("openblas_get_config", "openblas_get_corename")):
            config, core = getattr(lib, config_name, None), getattr(lib, core_name, None)
            if config is not None and core is not None:
                config.restype = core.restype = ctypes.c_char_p
                return config().decode().strip(), core().decode()
    return None


# OpenBLAS's GEMM kernels for AVX-512 (its corename for them)
AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


def openblas_core() -> str | None:
    """The name of the GEMM kernels NumPy's OpenBLAS runs ('Haswell', 'SkylakeX', ...), or None where NumPy's BLAS
    is not a bundled OpenBLAS."""
    info = _openblas_info()
    return None if info is None else info[1]


def openblas_kernels() -> str:
    """Which OpenBLAS NumPy runs and its GEMM kernels, e.g. 'OpenBLAS 0.3.31 ... kernels SkylakeX', plus any
    OPENBLAS_CORETYPE that forces them (the benchmarks print it: forced Haswell kernels ran large float32 GEMMs
    at 250 GFLOP/s on a 2-core AVX-512 machine where the detected SkylakeX ones ran at 460)."""
    info = _openblas_info()
    if info is None:
        return f"NumPy's BLAS is not a bundled OpenBLAS ({np.__version__})"
    forced = config.outside("OPENBLAS_CORETYPE")
    return f"{info[0]}, kernels {info[1]}" + (f" (forced by OPENBLAS_CORETYPE={forced})" if forced else "")
