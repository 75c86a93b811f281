"""The dependency engine on two independent elementwise-heavy branches: 2 worker threads vs 1.

Run: python benchmarks/engine.py [--size N] [--depth D]
One graph, two branches of D rounds of sin/tanh/mul/add on an (N, N) float32 array each, joined at
the end. The same plan runs through the engine with 1 and with 2 threads (NumPy's ufunc loops
release the GIL, so the branches can run at once), and on the sequential path; plain NumPy doing
the same work in one thread is the reference. Target: 2 threads >= 1.5x faster than 1 (needs two
idle cores).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
from _timing import best_time, fmt_ms  # noqa: E402

import ember as em  # noqa: E402
from ember.graph import Graph  # noqa: E402
from ember.graph.executor import Plan  # noqa: E402


def branch(t, depth):
    for _ in range(depth):
        t = (t.sin() * 0.9 + 0.1).tanh()
    return t


def numpy_branch(a, depth):
    for _ in range(depth):
        a = np.tanh(np.sin(a) * np.float32(0.9) + np.float32(0.1))
    return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=8)
    args = ap.parse_args()
    n, depth = args.size, args.depth

    cpu = em.device("cpu")
    g = Graph()
    x = em.Tensor._make(g.placeholder((n, n), np.float32, cpu, "x"), cpu)
    y = em.Tensor._make(g.placeholder((n, n), np.float32, cpu, "y"), cpu)
    out = branch(x, depth) + branch(y, depth)
    plan = Plan(g, [out._data])
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((n, n)).astype(np.float32)
    ya = rng.standard_normal((n, n)).astype(np.float32)
    feeds = {x._data: xa, y._data: ya}

    ref = numpy_branch(xa, depth) + numpy_branch(ya, depth)
    before = em.get_num_threads()
    times = {}
    try:
        for threads in (1, 2):
            em.set_num_threads(threads)
            (res,) = plan.run(feeds, parallel=True)
            np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-6)
            times[threads] = best_time(lambda: plan.run(feeds, parallel=True), repeat=7, min_time=0.2)
    finally:
        em.set_num_threads(before)
    t_seq = best_time(lambda: plan.run(feeds, parallel=False), repeat=7, min_time=0.2)
    t_np = best_time(lambda: numpy_branch(xa, depth) + numpy_branch(ya, depth), repeat=7, min_time=0.2)

    print(f"two branches x {depth} rounds of sin/mul/add/tanh on ({n}, {n}) float32 "
          f"({len(plan.steps)} steps), {os.cpu_count()} CPUs")
    print(f"  numpy, one thread         {fmt_ms(t_np)}")
    print(f"  plan, sequential path     {fmt_ms(t_seq)}   {t_seq / t_np:5.2f}x numpy")
    print(f"  plan, engine, 1 thread    {fmt_ms(times[1])}   {times[1] / t_np:5.2f}x numpy")
    print(f"  plan, engine, 2 threads   {fmt_ms(times[2])}   {times[2] / t_np:5.2f}x numpy")
    speedup = times[1] / times[2]
    print(f"speedup of 2 engine threads over 1: {speedup:.2f}x  (target >= 1.5x)")


if __name__ == "__main__":
    main()
