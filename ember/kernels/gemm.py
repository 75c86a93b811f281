"""float32 matrix products on the fastest kernel here: Ember's own AVX-512 GEMM (sgemm.py), oneMKL's
(mkl.py, the optional `mkl` extra) or NumPy's BLAS.

`matmul` is np.matmul for the products the ops compute (linear layers, convolutions' im2col and Winograd
products, attention). It takes Ember's kernel for float32 products of 2-D or equally batched 3-D operands
that are large enough to repay its call (about 2 us against NumPy's 1 us), where the host has AVX-512, the
`jit` extra is installed, and NumPy's BLAS is an OpenBLAS running narrower kernels than the CPU has (as
OPENBLAS_CORETYPE=Haswell makes it), or its AVX-512 kernels on an AMD Zen 4: on Intel's AVX-512 cores OpenBLAS's own
AVX-512 kernels ran these products in 0.7-1.1x the kernel's time, on a Zen 4, which runs each 512-bit instruction as
two 256-bit halves, in 0.95-1.6x (one thread; the transformer's and the LSTM's jitted training steps 0.96-1.03x ->
0.83-0.93x PyTorch's, two threads, AMD EPYC family 25 model 17, 2026-12-04). EMBER_GEMM=ember takes the kernel
wherever it runs, EMBER_GEMM=blas never. A B with strided
columns (a transposed weight) is copied into panels first (16 x 16 transposes when its K axis is the
contiguous one), which pays off from 16 rows of A. On the
AMD EPYC (Zen 5) this project runs on, where OPENBLAS_CORETYPE=Haswell holds NumPy's OpenBLAS to AVX2,
`benchmarks/gemm.py` (2 threads, 2026-11-27) measured 0.55-0.74x NumPy's time from 128 x 784 x 512 to
1024^3 and 0.64-0.97x on an MLP's second layer and an LSTM step's smaller products (two runs).

With EMBER_GEMM=mkl and the `mkl` extra installed, 2-D products of MKL_GEMM's sizes run on MKL's cblas_sgemm first,
which beat OpenBLAS's own AVX-512 kernels on them and, where OPENBLAS_CORETYPE=Haswell held OpenBLAS down, Ember's
kernel too (0.66x against 0.88x OpenBLAS's time over the models' products, one thread; see mkl.py and MKL_GEMM).
`auto` does not take it: after each multi-threaded call MKL's GNU OpenMP threads spin for a while, on the cores the
convolutions and Ember's pool then need (LeNet-5's training step 6.95 ms with MKL against 5.13 ms without on the
2-core Xeon of 2026-12-02, the MLP's 2.52 against 2.98: a win only for GEMM-bound models). EMBER_GEMM=ember (Ember's
kernel wherever it runs) and EMBER_GEMM=blas never take it.

The kernels built on the driver (a single sample's convolution by output rows or channel halves, the Winograd
convolution's forward and weight gradient, a pointwise convolution's affine epilogue, attention's one-kernel
forward) take it wherever AVX-512's block runs (`driver_enabled`; on AVX2's they ran slower than their BLAS
paths, see `_wide_block`), over OpenBLAS's AVX-512 kernels too: what they win is no Python in the split and the patches or
tiles kept in cache between the copy and the product, not a faster product. On the 2-core Xeon (family 6 model 167,
OpenBLAS 0.3.31 SkylakeX kernels, 2026-12-02), in one process against plain products' rule for them: ResNet-18's
batch-1 forward 25.5 -> 22.6-23.5 ms under ember.jit, 27.3 -> 24.6 ms eager; MobileNetV2's 11.9 -> 11.0 ms under
ember.jit; ResNet-20's jitted training step 59.6 -> 57.0 ms; batch-32 inference 1-5% faster.
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
MKL_GEMM = Table("matmul: mkl sgemm",
                 measured_on="Intel Xeon (family 6 model 167, AVX-512), 2 cores, OpenBLAS 0.3.31 SkylakeX kernels, "
                             "MKL 2026.2, 2026-12-02", values={
    "min_flops": (4e6, "below this MKL's call through ctypes (4-6 us with its arguments) outweighs its faster "
                       "kernel: 64 x 128 x 128 took 23 us against NumPy's 20, 32 x 128 x 512 37 against 43"),
    "min_rows": (2, "a single row is a matrix-vector product, which OpenBLAS runs faster (1 x 512 x 1000: 1.8x "
                    "OpenBLAS's time on MKL; 2 rows: 0.73x)"),
    "min_depth": (32, "a shorter inner dimension (a 1x1 convolution of 8-24 channels) leaves MKL no gain to count on "
                      "(96 x 16 x 3136: 0.99x, 96 x 24 x 3136: 1.01x)"),
})
algorithms("matmul", [
    Algorithm("mkl sgemm", "EMBER_GEMM=mkl with the mkl extra installed: float32 2-D NumPy operands within "
              "MKL_GEMM's sizes", None),
    Algorithm("ember sgemm", "float32 2-D or equally batched 3-D NumPy operands of min_flops or more, AVX-512, Numba, "
              "and NumPy's OpenBLAS running narrower kernels than the CPU has, or its AVX-512 ones on an AMD Zen 4 "
              "(EMBER_GEMM=ember: wherever it runs)", None),
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


def driver_enabled() -> bool:
    """Whether Ember's GEMM driver may run in this process at all: the kernels built on it (a single sample's
    convolution by output rows or channel halves, the Winograd convolution's compiled forward and weight gradient,
    a pointwise convolution's affine epilogue, attention's one-kernel forward) take it wherever the host has
    AVX-512 and the `jit` extra is installed, unless EMBER_GEMM=blas or EMBER_KERNELS=numpy; plain products take
    it only where `enabled()` says so."""
    if config.KERNELS.get() == "numpy" or background.numpy_only():
        return False
    if "driver" not in _state:
        choice = _checked(config.GEMM.get())
        _state["driver"] = choice != "blas" and _wide_block() and _numba_available() and _driver_runs()
    return _state["driver"]


def loops_take_driver() -> bool:
    """Whether compiled loops whose products are a few rows each (a recurrent layer's time loop: 16 x 512 x 128 a
    thread a step) call Ember's driver rather than NumPy's OpenBLAS: where plain products take it (`enabled`), and
    where AVX2 is the CPU's widest. There OpenBLAS's Haswell kernels cost more per call than such products repay:
    the LSTM row's eager training step 26.7 -> 19.6 ms on one thread (process CPU time), 16.5 -> 14.7 and 13.9 ->
    11.9 ms on two in two processes (best of six turns each, AMD EPYC Zen 3, 2026-12-04); the GRU's unchanged. Not
    measured against OpenBLAS's AVX-512 kernels, which `auto` keeps there."""
    return enabled() or narrow_driver()


def narrow_driver() -> bool:
    """Whether Ember's driver runs here on AVX2's block (the CPU's widest) and the settings allow it
    (not EMBER_GEMM=blas or EMBER_KERNELS=numpy): then the products measured faster on it than on OpenBLAS's
    Haswell kernels take it, not the rest (a recurrent time loop's, loops_take_driver; a pointwise convolution's
    with its affine epilogue on large maps, conv/affine.py)."""
    if config.KERNELS.get() == "numpy" or background.numpy_only() or config.GEMM.get() == "blas":
        return False
    if "narrow" not in _state:
        from ember.kernels.sgemm_microkernel import AVX2, BLOCK

        _state["narrow"] = BLOCK is AVX2 and _numba_available() and _driver_runs()
    return _state["narrow"]


def _wide_block() -> bool:
    """Whether the micro-kernel is AVX-512's. The kernels built on the driver took longer on AVX2's block than
    their BLAS paths (the GRU's jitted step 13.7-14.8 -> 16.1-16.4 ms, ResNet-18's batch-1 forward 47.8-48.7 ->
    50.7-52.6 ms; one thread, Zen 3), where OpenBLAS's kernels are as wide as the CPU's."""
    from ember.kernels.sgemm_microkernel import AVX512, BLOCK

    return BLOCK is AVX512


def _driver_runs() -> bool:
    from ember.kernels.sgemm import driver_address

    return driver_address() != 0


def _checked(choice: str) -> str:
    """The EMBER_GEMM setting `choice`, checked."""
    if choice not in ("auto", "ember", "blas", "mkl"):
        raise ValueError(f"EMBER_GEMM must be 'auto', 'ember', 'blas' or 'mkl', got {choice!r}")
    return choice


def _choose(choice: str) -> bool:
    if _checked(choice) in ("blas", "mkl") or not _numba_available():
        return False
    from ember.kernels.blas import AVX512_CORES, openblas_core

    # auto: only where NumPy's BLAS is an OpenBLAS held to narrower kernels; its AVX-512 ones (and other
    # libraries, tuned for their machines) ran these products in 0.7-1.1x its time (benchmarks/gemm.py).
    # Asked before the driver is compiled, which costs 1.4 s where the kernel cache is empty.
    # Where the CPU's widest is AVX2, OpenBLAS's Haswell kernels are not narrower than it.
    core = openblas_core()
    if choice == "auto" and (core is None or not _wide_block()
                             or (core.lower() in AVX512_CORES and not _halved_avx512())):
        return False
    return _driver_runs()


def _halved_avx512() -> bool:
    """Whether the CPU is an AMD Zen 4 (family 25 with AVX-512), which runs each 512-bit instruction as two 256-bit
    halves. There OpenBLAS's AVX-512 kernels (SkylakeX, blocked for Intel's cores) ran the benchmark models' products
    in 1.0-1.6x Ember's kernel's time on one thread (benchmarks/gemm.py's shapes; all but two 3x3 convolutions'
    im2col products, 0.95-1.0x, faster on Ember's), where on Intel's AVX-512 cores they ran in 0.7-1.1x its time."""
    from ember.kernels.machine import detect

    m = detect()
    return m.vendor == "AuthenticAMD" and m.family == 25 and m.avx512


def _numba_available() -> bool:
    try:
        import llvmlite  # noqa: F401
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def takes_own(a, b, out=None) -> bool:
    """Whether a @ b (into out) runs on Ember's kernel: see the module's docstring."""
    # size first: most calls are small ones, and this is on every matmul's path; then the setting, off on most
    # hosts, before the layout checks
    return _sized(a, b) and enabled() and _fits(a, b, out)


def fits_own(a, b, out=None) -> bool:
    """Whether Ember's kernel can take a @ b (into out) as the arrays lie and would repay its call: `takes_own`
    without the setting (the kernels built on the driver ask `driver_enabled` instead)."""
    return _sized(a, b) and _fits(a, b, out)


def _sized(a, b) -> bool:
    """Whether a @ b has float32 NumPy operands and is large enough to repay the kernel's call."""
    return (type(a) is np.ndarray and type(b) is np.ndarray and b.ndim > 0 and 2.0 * a.size * b.shape[-1] >= MIN_FLOPS
            and a.dtype == np.float32 and b.dtype == np.float32)


def _fits(a, b, out) -> bool:
    """Whether the kernel can take a @ b (into out) as the arrays lie: shapes, strides and an output apart."""
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
    return True


def mkl_mode() -> str | None:
    """Which products MKL takes in this process: "table" (EMBER_GEMM=mkl: MKL_GEMM's sizes), or None (any other
    setting, the extra absent, EMBER_KERNELS=numpy)."""
    if config.KERNELS.get() == "numpy":
        return None
    if "mkl" not in _state:
        choice = _checked(config.GEMM.get())  # not _choose: on a Zen 4 that compiles the driver (1.3 s), in the
        from ember.kernels import mkl  # caller, even where an op runs its NumPy path while its kernels compile

        _state["mkl"] = "table" if choice == "mkl" and mkl.available() else None
    return _state["mkl"]


def _mkl_sizes(a, b) -> bool:
    """Whether a @ b is a 2-D float32 product MKL may take in this process (its mode, and MKL_GEMM's sizes in auto
    mode); whether cblas_sgemm can take the arrays as they lie is mkl.fits."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2 \
            or a.dtype != np.float32 or b.dtype != np.float32:
        return False
    if mkl_mode() != "table":
        return False
    (m, k), n = a.shape, b.shape[1]
    return 2.0 * m * k * n >= MKL_GEMM["min_flops"] and m >= MKL_GEMM["min_rows"] and k >= MKL_GEMM["min_depth"]


def takes_mkl(a, b, out=None) -> bool:
    """Whether a @ b (into out) runs on MKL's cblas_sgemm: see the module's docstring and MKL_GEMM."""
    if not _mkl_sizes(a, b):
        return False
    from ember.kernels import mkl

    return mkl.fits(a, b, out)


def matmul(a, b, out=None, xp=np):
    """xp.matmul(a, b, out=out), on Ember's float32 kernel where `takes_own` says so, on MKL's where `takes_mkl`
    does (NumPy arrays only)."""
    # takes_own's size test repeated inline: small products, the common case, skip its call (0.1 us a matmul)
    if xp is not np or not b.ndim or 2.0 * a.size * b.shape[-1] < MIN_FLOPS:
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    if _mkl_sizes(a, b):
        from ember.kernels import mkl

        result = mkl.sgemm(a, b, out)  # None where it cannot take the arrays as they lie
        if result is not None:
            if listening[0]:
                note("matmul", "mkl sgemm")
            return result
    if takes_own(a, b, out):
        from ember.kernels.sgemm import sgemm

        if listening[0]:
            note("matmul", "ember sgemm")
        if out is None:
            out = np.empty(a.shape[:-1] + (b.shape[-1],), np.float32)
        return sgemm(a, b, out)
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
