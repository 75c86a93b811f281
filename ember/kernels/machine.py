"""What this host has, detected once: the CPU (model, instruction sets), the cores this process may use, the
caches, NumPy's BLAS and the kernels it runs, and whether Numba is there.

Kernels read these facts instead of guessing (a cache block sized from the L2, an AVX-512 micro-kernel only
where the CPU has AVX-512), and the benchmarks print `describe()` beside every figure, so a number always
comes with the machine it was measured on.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from dataclasses import dataclass, field

from ember import config


@dataclass(frozen=True)
class Machine:
    """The facts `detect()` found."""

    cpu: str  # model name, e.g. "Intel(R) Xeon(R) Processor"
    vendor: str
    family: int | None
    model: int | None
    isa: frozenset = field(repr=False)  # instruction-set flags as Linux names them: "avx2", "avx512f", "fma", ...
    cores: int  # cores this process may run on
    l1d: int | None  # bytes per core
    l2: int | None  # bytes per core
    l3: int | None  # bytes, shared
    blas: str  # NumPy's BLAS, e.g. "OpenBLAS 0.3.31 ... kernels SkylakeX"
    blas_kernels: str | None  # the kernels NumPy's OpenBLAS runs ("SkylakeX", "Haswell", ...), None if not OpenBLAS
    blas_forced: str | None  # OPENBLAS_CORETYPE when it forces those kernels
    numba: bool

    @property
    def avx512(self) -> bool:
        """Whether the CPU has AVX-512 F (the micro-kernels' instructions)."""
        return "avx512f" in self.isa

    @property
    def avx2(self) -> bool:
        """Whether the CPU has AVX2 and FMA."""
        return "avx2" in self.isa and "fma" in self.isa


def _cpuinfo() -> dict:
    """The first processor's fields of /proc/cpuinfo (Linux), else {}."""
    info: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


@functools.cache
def cpu_flags() -> frozenset:
    """The CPU's instruction-set flags as Linux names them ("avx2", "avx512f", "fma", ...), empty elsewhere."""
    return frozenset(_cpuinfo().get("flags", "").split())


def _cache_bytes(level: int, kind: str) -> int | None:
    """The size of cpu0's cache of `level` and `kind` ("Data", "Unified") from sysfs, or None."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return None
    for entry in entries:
        try:
            with open(f"{base}/{entry}/level") as f:
                if int(f.read()) != level:
                    continue
            with open(f"{base}/{entry}/type") as f:
                if f.read().strip() != kind:
                    continue
            with open(f"{base}/{entry}/size") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        return int(digits) * scale if digits.isdigit() else None
    return None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


@functools.cache
def detect() -> Machine:
    """This host's facts (read once per process)."""
    from ember.kernels import blas
    from ember.kernels.numba_loader import numba_available
    from ember.kernels.parallel import cores

    info = _cpuinfo()
    isa = cpu_flags()
    core = blas.openblas_core()
    return Machine(
        cpu=info.get("model name") or platform.processor() or platform.machine(),
        vendor=info.get("vendor_id", ""),
        family=_int(info.get("cpu family")),
        model=_int(info.get("model")),
        isa=isa,
        cores=cores(),
        l1d=_cache_bytes(1, "Data"),
        l2=_cache_bytes(2, "Unified"),
        l3=_cache_bytes(3, "Unified"),
        blas=blas.openblas_kernels(),
        blas_kernels=core,
        blas_forced=config.outside("OPENBLAS_CORETYPE") if core is not None else None,
        numba=numba_available(),
    )


def describe() -> str:
    """One line naming the CPU, its cores and the BLAS kernels in use, for benchmark output."""
    m = detect()
    where = f"family {m.family} model {m.model}, " if m.family is not None else ""
    isa = "AVX-512" if m.avx512 else "AVX2" if m.avx2 else platform.machine()
    forced = f", forced by OPENBLAS_CORETYPE={m.blas_forced}" if m.blas_forced else ""
    kernels = f"OpenBLAS {m.blas_kernels} kernels{forced}" if m.blas_kernels else m.blas
    return (f"{m.cpu} ({where}{isa}), {m.cores} cores; NumPy's BLAS: {kernels}; "
            f"Ember's micro-kernel: {microkernel()}; Numba {'yes' if m.numba else 'no'}; "
            f"Python {sys.version.split()[0]}")


def microkernel() -> str:
    """The register block Ember's micro-kernels use here, e.g. "AVX2 4 x 24", or "none"."""
    from ember.kernels.sgemm_microkernel import BLOCK, microkernel_address

    if BLOCK is None or not microkernel_address():
        return "none"
    return f"{'AVX-512' if BLOCK.isa == 'avx512f' else 'AVX2'} {BLOCK.mr} x {BLOCK.nr}"
