"""Ember jit vs Ember eager per benchmark model, interleaved in one process (jit must never be slower).

Run: python benchmarks/jit_vs_eager.py [--models mlp,lenet5,...] [--rounds 7] [--cpu-time]
Uses benchmarks/train_step.py's models, data and optimizers. Each round times every variant once
(batches of calls lasting >= 0.15 s, after one untimed call) and the best round counts, so both see the
same machine load.
--cpu-time measures the process's CPU time instead of wall time: steadier on a shared machine when
BLAS runs one thread (OPENBLAS_NUM_THREADS=1), since time spent waiting for the CPU is not counted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import train_step  # noqa: E402
from _timing import interleaved, machine_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(list(train_step.CASES) + list(train_step.INFER_CASES)))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cpu-time", action="store_true", help="process CPU time instead of wall time")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(machine_line())
    print(f"{'model':22s} {'ember eager':>12s} {'ember jit':>12s} {'jit/eager':>10s}  ({'CPU' if args.cpu_time else 'wall'} time)")
    for name in args.models.split(","):
        b = train_step._builders(name)
        r = interleaved({"eager": b["ember"](), "jit": b["jit"]()}, args.rounds, clock)
        print(f"{name:22s} {r['eager'] * 1e3:9.2f} ms {r['jit'] * 1e3:9.2f} ms {r['jit'] / r['eager']:9.3f}x", flush=True)


if __name__ == "__main__":
    main()
