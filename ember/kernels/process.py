"""`tune_process()`: the process-wide settings Ember's workloads run best with, applied only when asked.

`import ember` changes nothing outside Ember (environment, BLAS threads, malloc). A program that trains or
benchmarks calls this once at its start, as `ember train`, `ember tune` and the benchmarks do.
"""

from __future__ import annotations

import ctypes
import signal
import sys

from ember.kernels import blas


def keep_freed_blocks_for_reuse() -> bool:
    """Ask glibc to keep large freed blocks in the heap instead of unmapping them; True if applied.

    By default glibc serves arrays above 128 KiB with fresh mmaps and unmaps them when freed, so every training
    step page-faults its activations and gradients in again. Raising the mmap and trim thresholds (to glibc's
    32 MiB maximum) lets freed blocks be reused, which is what a caching allocator buys."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) == 1
        return bool(libc.mallopt(m_trim_threshold, 256 << 20) == 1 and ok)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False


def tune_process(malloc: bool = True, blas_spin: bool = True) -> dict:
    """Tune this process for training: glibc keeps freed blocks for reuse (`malloc`), and NumPy's OpenBLAS
    threads sleep 0.2 ms after a GEMM instead of spinning 0.1 s beside Ember's threads, here and in the processes
    this one starts (`blas_spin`, unless OPENBLAS_THREAD_TIMEOUT is set; Ember's pool does the first part itself
    as it starts). Returns what was applied."""
    return {"malloc": malloc and keep_freed_blocks_for_reuse(), "blas_spin": blas_spin and blas.shorten_spin()}


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the thread that started it ends (PR_SET_PDEATHSIG); nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the caller's other safeguards must do
        pass
