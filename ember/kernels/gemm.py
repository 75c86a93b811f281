"""float32 matrix products on the faster of two kernels: Ember's own AVX-512 GEMM (sgemm.py) or
NumPy's BLAS.

`matmul` is np.matmul for the products the ops compute (linear layers, convolutions' im2col and Winograd
products, attention). It takes Ember's kernel for float32 products of 2-D or equally batched 3-D operands
that are large enough to repay its call (about 2 us against NumPy's 1 us), where the host has AVX-512, the
`jit` extra is installed, and NumPy's BLAS is an OpenBLAS running narrower kernels than the CPU has (as
OPENBLAS_CORETYPE=Haswell makes it): OpenBLAS's own AVX-512 kernels ran these products in 0.7-1.1x the
kernel's time. EMBER_GEMM=ember takes the kernel wherever it runs, EMBER_GEMM=blas never. A B with strided
columns (a transposed weight) is copied into panels first (16 x 16 transposes when its K axis is the
contiguous one), which pays off from 16 rows of A. On the
AMD EPYC (Zen 5) this project runs on, where OPENBLAS_CORETYPE=Haswell holds NumPy's OpenBLAS to AVX2,
`benchmarks/gemm.py` (2 threads, 2026-11-27) measured 0.55-0.74x NumPy's time from 128 x 784 x 512 to
1024^3 and 0.64-0.97x on an MLP's second layer and an LSTM step's smaller products (two runs).
"""

from __future__ import annotations

import numpy as np

from ember import config
from ember.kernels import background
from ember.kernels.selection import Algorithm, Table, algorithms, always, listening, note

GEMM = Table("matmul", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27",
             values={
    "min_flops": (2.5e5, "below this, NumPy's call (1 us) beats the driver's (2 us); 32 x 64 x 64 broke even"),
    "min_rows_strided_b": (16, "a strided B's panel copy (16 x 16 transposes) is repaid by this many rows of A"),
})
MIN_FLOPS = GEMM["min_flops"]  # read on every product's path: a module constant
algorithms("matmul", [
    Algorithm("ember sgemm", "float32 2-D or equally batched 3-D NumPy operands of min_flops or more, AVX-512, Numba, "
              "and NumPy's OpenBLAS running narrower kernels than the CPU has (EMBER_GEMM=ember: wherever it runs)",
              None),
    Algorithm("numpy", "otherwise: NumPy's matmul (its BLAS)", always),
])
_state: dict = {}


def enabled() -> bool:
    """Whether float32 products may run on Ember's kernel in this process (host, extra and settings allow)."""
    if config.KERNELS.get() == "numpy" or background.numpy_only():
        return False
    if "own" not in _state:
        _state["own"] = _choose(config.GEMM.get())
    return _state["own"]


def _choose(choice: str) -> bool:
    if choice not in ("auto", "ember", "blas"):
        raise ValueError(f"EMBER_GEMM must be 'auto', 'ember' or 'blas', got {choice!r}")
    if choice == "blas" or not _numba_available():
        return False
    from ember.kernels.blas import AVX512_CORES, openblas_core
    from ember.kernels.sgemm import driver

    if driver() is None:
        return False
    # auto: only where NumPy's BLAS is an OpenBLAS held to narrower kernels; its AVX-512 ones (and other
    # libraries, tuned for their machines) ran these products in 0.7-1.1x its time (benchmarks/gemm.py)
    core = openblas_core()
    return choice == "ember" or (core is not None and core.lower() not in AVX512_CORES)


def _numba_available() -> bool:
    try:
        import llvmlite  # noqa: F401
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def takes_own(a, b, out=None) -> bool:
    """Whether a @ b (into out) runs on Ember's kernel: see the module's docstring."""
    # size first: most calls are small ones, and this is on every matmul's path
    if type(a) is not np.ndarray or type(b) is not np.ndarray or not b.ndim or 2.0 * a.size * b.shape[-1] < MIN_FLOPS:
        return False
    if a.dtype != np.float32 or b.dtype != np.float32:
        return False
    if a.ndim != b.ndim or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[0] != b.shape[0]):
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or not k:
        return False
    if b.strides[-1] != 4 and m < GEMM["min_rows_strided_b"]:
        return False
    if any(s % 4 for s in a.strides + b.strides):  # a view at a byte offset: the driver steps in whole values
        return False
    if out is not None and (out.dtype != np.float32 or out.shape != a.shape[:-1] + (n,) or out.strides[-1] != 4
                            or np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        return False
    return enabled()


def matmul(a, b, out=None, xp=np):
    """xp.matmul(a, b, out=out), on Ember's float32 kernel where `takes_own` says so (NumPy arrays only)."""
    # takes_own's size test repeated inline: small products, the common case, skip its call (0.1 us a matmul)
    if xp is not np or not b.ndim or 2.0 * a.size * b.shape[-1] < MIN_FLOPS or not takes_own(a, b, out):
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    from ember.kernels.sgemm import sgemm

    if listening[0]:
        note("matmul", "ember sgemm")
    if out is None:
        out = np.empty(a.shape[:-1] + (b.shape[-1],), np.float32)
    return sgemm(a, b, out)
