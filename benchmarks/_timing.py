"""Shared timing helpers for the benchmarks: best-of-N wall time per call. Importing this tunes the process as
`ember train` does (ember.kernels.tune_process), so the benchmarks time what training runs; `--untuned` leaves
the process as a plain script that never calls it has it."""

from __future__ import annotations

import os
import sys
import time

from ember.kernels import tune_process
from ember.kernels.background import use_deterministic_algorithms

# OpenBLAS reads these when NumPy loads it; a benchmark must see them as users have them
OPENBLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
HELD_DOWN = {"OPENBLAS_CORETYPE": "Haswell"}  # the setting Round 2's figures were measured under
# --cpu-time's clock: the whole process's CPU time, not the calling thread's, so work an op hands to another thread
# (the dependency engine's workers, a pool thread) is counted too. Both frameworks run one intra-op thread then.
CPU_CLOCK = time.process_time


def run_as_users_do() -> None:
    """Re-run this benchmark with OpenBLAS's variables unset, as on users' machines, or with `--held-down` set to
    OPENBLAS_CORETYPE=Haswell (AVX2 kernels on an AVX-512 CPU) to reproduce the older figures. Benchmarks import
    this module before they parse their arguments, so `--held-down` works on each of them."""
    held = "--held-down" in sys.argv
    sys.argv[:] = [a for a in sys.argv if a != "--held-down"]
    want = HELD_DOWN if held else {}
    if all(os.environ.get(v) == want.get(v) for v in OPENBLAS_VARIABLES):
        return
    if os.environ.get("EMBER_BENCHMARK_REEXEC"):  # exec'd once already: never loop
        return
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARIABLES}
    env.update(want, EMBER_BENCHMARK_REEXEC="1")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


run_as_users_do()
if "--untuned" in sys.argv:
    sys.argv.remove("--untuned")
else:
    tune_process()
# Timings are of the steady state: kernels compile where first called (during the untimed warm-up calls), never
# a NumPy path standing in while they compile in the background. cold_start.py times first calls itself.
use_deterministic_algorithms(True)


def best_time(fn, *, repeat: int = 5, min_time: float = 0.05) -> float:
    """Seconds per call: calls are batched until a batch lasts min_time; the best batch wins."""
    fn()  # warm up
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time:
            break
        n *= 2
    best = dt / n
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def interleaved(fns: dict, rounds: int, clock=time.perf_counter, min_time: float = 0.15) -> dict:
    """Best seconds per call of each function, the functions taking turns within every round, so that a
    slow spell of a shared machine falls on all of them rather than on whichever ran then. Each turn
    starts with an untimed call, which absorbs the previous function's threads winding down."""
    sizes = {}
    for name, fn in fns.items():
        fn()
        n = 1
        while True:
            t0 = clock()
            for _ in range(n):
                fn()
            if clock() - t0 >= min_time:
                break
            n *= 2
        sizes[name] = n
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            t0 = clock()
            for _ in range(sizes[name]):
                fn()
            best[name] = min(best[name], (clock() - t0) / sizes[name])
    return best


def fmt_us(seconds: float) -> str:
    """Seconds as microseconds with a unit."""
    return f"{seconds * 1e6:9.2f} us"


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with a unit."""
    return f"{seconds * 1e3:9.2f} ms"


def machine_line() -> str:
    """The CPU and NumPy's BLAS kernels (the two facts that moved these ratios most between machines), and whether
    OPENBLAS_CORETYPE forces the kernels: benchmark with it unset, as users run."""
    from ember.kernels.machine import describe

    return describe()
