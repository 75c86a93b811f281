"""oneMKL's float32 GEMM (cblas_sgemm), where the optional `mkl` extra is installed: found, loaded, and run on the
thread count Ember's settings give it.

On an Intel Xeon with AVX-512 (family 6 model 167) whose NumPy runs OpenBLAS's SkylakeX kernels, MKL 2026.2 ran
the float32 products of the benchmark models (MLP, transformer, LSTM/GRU, im2col convolutions) in 0.67-0.95x
OpenBLAS's time on one thread, and in 0.54-0.91x on two (benchmarks/cpu_libraries.py; docs/cpu_libraries.md).
gemm.py's selection takes it where it won (GEMM's thresholds); NumPy's path stays for everything else.

The library is the wheel's single dynamic library, libmkl_rt, in <prefix>/lib (where pip puts the wheel's data
files; no loader path names it), else wherever the dynamic loader finds it. It runs on MKL's GNU OpenMP threading
layer: libgomp is the runtime PyTorch and the oneDNN builds for GCC use too, so a process holds one OpenMP runtime,
not two (MKL's default, Intel's libiomp5, spins 200 ms after each call beside Ember's and OpenBLAS's threads).
`parallel` sets its thread count with set_num_threads and holds it to one thread inside a split, as it does
OpenBLAS's. Nothing here runs at import: the library is loaded on the first product that may use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import site
import sys

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
GNU_THREADING = 3  # MKL_THREADING_GNU
_NAMES = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so")
_INT32_MAX = 2**31 - 1  # libmkl_rt's cblas takes 32-bit dimensions (the LP64 interface)
_state: dict = {}  # "lib": the loaded library or None, "why": the reason it is not there, "sgemm", "threads"


def _candidates() -> list[str]:
    """Where the wheel's libmkl_rt may be: <prefix>/lib of this environment, its base and the user's site, then
    the dynamic loader's own search (LD_LIBRARY_PATH, a conda or system MKL)."""
    dirs = [os.path.join(p, "lib") for p in dict.fromkeys((sys.prefix, sys.base_prefix, site.USER_BASE or ""))
            if p]
    found = [os.path.join(d, name) for d in dirs for name in _NAMES if os.path.exists(os.path.join(d, name))]
    system = ctypes.util.find_library("mkl_rt")
    return found + ([system] if system else [])


def _load():
    """Load libmkl_rt on MKL's GNU threading layer, once; None with the reason in _state["why"] where it cannot."""
    if "lib" in _state:
        return _state["lib"]
    _state["lib"], _state["why"] = None, "the mkl extra is not installed (pip install 'ember[mkl]')"
    paths = _candidates()
    if not paths:
        return None
    try:
        # MKL's GNU layer calls GOMP's entry points without linking libgomp itself: they must be global
        ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        _state["why"] = "MKL's GNU threading layer needs GCC's OpenMP runtime, libgomp.so.1, which is not installed"
        return None
    try:
        lib = ctypes.CDLL(paths[0], mode=ctypes.RTLD_GLOBAL)
        if lib.MKL_Set_Threading_Layer(ctypes.c_int(GNU_THREADING)) != GNU_THREADING:
            _state["why"] = f"{paths[0]}: MKL already runs another threading layer in this process"
            return None
    except (OSError, AttributeError) as e:
        _state["why"] = f"{paths[0]} does not load: {e}"
        return None
    i, p, f = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    sgemm = lib.cblas_sgemm
    sgemm.restype = None
    sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    lib.MKL_Set_Num_Threads.argtypes = [i]
    lib.MKL_Get_Max_Threads.restype = i
    _state.update(lib=lib, why=None, sgemm=sgemm, path=paths[0])
    from ember.kernels import parallel  # (parallel imports this module)

    set_threads(1 if parallel.splitting_now() else parallel.get_num_threads())
    return lib


def available() -> bool:
    """Whether MKL's cblas_sgemm can run here (the extra installed and loadable); loads it on the first call."""
    return _load() is not None


def why_not() -> str | None:
    """Why MKL does not run here (None where it does)."""
    _load()
    return _state["why"]


def version() -> str | None:
    """MKL's version line, or None where it does not run here."""
    lib = _load()
    if lib is None:
        return None
    buf = ctypes.create_string_buffer(256)
    lib.MKL_Get_Version_String(buf, 256)
    return buf.value.decode().split(" for ")[0]


def loaded() -> bool:
    """Whether MKL was loaded in this process (thread settings reach it only then)."""
    return _state.get("lib") is not None


def get_threads() -> int | None:
    """MKL's thread count, or None where it is not loaded."""
    return _state["lib"].MKL_Get_Max_Threads() if loaded() else None


def set_threads(n: int) -> None:
    """Run MKL's products on `n` threads (nothing where it is not loaded: it takes the setting when it loads)."""
    if loaded():
        _state["lib"].MKL_Set_Num_Threads(n)


def _operand(x: np.ndarray) -> tuple[int, int] | None:
    """(CBLAS transpose flag, leading dimension) of a 2-D float32 array as it lies, or None where it is neither
    row-major nor column-major with rows in whole values."""
    s0, s1 = x.strides
    if s1 == 4 and s0 % 4 == 0 and s0 >= 4 * x.shape[1]:
        return NO_TRANS, max(s0 // 4, 1)
    if s0 == 4 and s1 % 4 == 0 and s1 >= 4 * x.shape[0]:
        return TRANS, max(s1 // 4, 1)
    return None


def _layout(a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> tuple | None:
    """(transa, lda, transb, ldb) for cblas_sgemm on a @ b (into out) as the arrays lie, or None where it cannot
    take them: aligned 2-D float32 operands, each row- or column-major, an output of unit column stride that
    overlaps neither, dimensions within 32 bits."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != np.float32 or b.dtype != np.float32 \
            or not (a.flags.aligned and b.flags.aligned):  # (a float* off by a byte is undefined in C)
        return None
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or not (m and n and k) or max(a.size, b.size, m * n) > _INT32_MAX:
        return None
    left, right = _operand(a), _operand(b)
    if left is None or right is None:
        return None
    if out is not None and (out.dtype != np.float32 or out.shape != (m, n) or out.strides[1] != 4
                            or not out.flags.aligned
                            or out.strides[0] % 4 or out.strides[0] < 4 * n
                            or np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        return None
    return left + right


def fits(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> bool:
    """Whether cblas_sgemm can compute a @ b (into out) on these arrays as they lie (see `_layout`)."""
    return _layout(a, b, out) is not None


def sgemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, beta: float = 0.0) -> np.ndarray | None:
    """out = a @ b + beta * out by MKL (loaded: `available()`), returning out; None where `fits` does not hold
    (nothing computed). One call checks and computes: its Python work is most of MKL's cost on small products."""
    layout = _layout(a, b, out)
    if layout is None:
        return None
    ta, lda, tb, ldb = layout
    (m, k), n = a.shape, b.shape[1]
    if out is None:
        out = np.empty((m, n), np.float32)
    _state["sgemm"](ROW_MAJOR, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, beta, out.ctypes.data,
                    out.strides[0] // 4)
    return out
