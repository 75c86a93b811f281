"""The CPU caching allocator on allocation-heavy loops: with and without the pool.

Run: python benchmarks/allocator.py [--quick]
1. Raw: allocate an array, write it, drop it, for several sizes: np.empty vs the pool.
2. Eager ops: a chain of elementwise ops on large tensors with eager outputs from the pool
   (`em.memory.set_eager_pool(True)`, used for operands of 8 MiB and up) vs fresh NumPy arrays;
   PyTorch on the same loop for reference.
3. Graph: a jitted elementwise chain run with the plan's arena (allocated once from the pool) vs
   fresh arrays for every step.
Large arrays are where a pool pays: glibc serves big requests with fresh mmap'ed pages that fault
on first touch, while a cached block's pages are already mapped.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import best_time, fmt_ms, fmt_us  # noqa: E402

import ember as em  # noqa: E402
from ember.runtime import set_memory_planning  # noqa: E402
from ember.runtime.allocator import pool  # noqa: E402


def raw(quick: bool) -> None:
    print("\nRaw allocation + first write + free, time per iteration")
    print(f"  {'size':>9s} {'np.empty':>12s} {'pool':>12s} {'np / pool':>10s}")
    for nbytes in (64 << 10, 1 << 20, 8 << 20, 64 << 20):
        n = nbytes // 4

        def plain(n=n):
            a = np.empty(n, np.float32)
            a.fill(1.0)

        def pooled(n=n):
            a = pool.empty((n,), np.float32)
            a.fill(1.0)

        t_np = best_time(plain, repeat=3 if quick else 7)
        t_pool = best_time(pooled, repeat=3 if quick else 7)
        print(f"  {nbytes >> 10:>6d} KiB {fmt_us(t_np)} {fmt_us(t_pool)} {t_np / t_pool:9.2f}x")


def eager(quick: bool) -> None:
    print("\nEager elementwise chain y = ((x * 2 + 1).tanh() * x - x).abs(), time per chain")
    print(f"  {'shape':>12s} {'fresh':>12s} {'pooled':>12s} {'fresh/pooled':>13s} {'torch':>12s}")
    for side in (512, 2048, 4096):
        x = em.randn(side, side)
        xt = torch.from_numpy(x.numpy().copy())

        def chain(x=x):
            return ((x * 2 + 1).tanh() * x - x).abs()

        def tchain(x=xt):
            return ((x * 2 + 1).tanh() * x - x).abs()

        ref = chain().numpy().copy()
        t_fresh = best_time(chain, repeat=3 if quick else 7)
        em.memory.set_eager_pool(True)
        try:
            np.testing.assert_array_equal(chain().numpy(), ref)
            t_pool = best_time(chain, repeat=3 if quick else 7)
        finally:
            em.memory.set_eager_pool(False)
        t_torch = best_time(tchain, repeat=3 if quick else 7)
        print(f"  {side:>5d}x{side:<5d} {fmt_ms(t_fresh)} {fmt_ms(t_pool)} {t_fresh / t_pool:12.2f}x {fmt_ms(t_torch)}")


def graph(quick: bool) -> None:
    print("\nJitted elementwise chain (8 steps, no fusion), time per call: fresh arrays vs the plan's arena")
    print(f"  {'shape':>12s} {'fresh':>12s} {'arena':>12s} {'fresh/arena':>12s}")

    @em.jit(passes=())  # unfused, so every op is a step with a result of its own
    def f(x):
        y = (x * 2 + 1).tanh()
        y = (y * x - x).abs()
        return (y + 1).sqrt().sum()

    for side in (512, 2048, 4096):
        x = em.randn(side, side)
        times = []
        for memory in (False, True):
            set_memory_planning(memory)
            try:
                f(x)
                times.append(best_time(lambda: f(x), repeat=3 if quick else 7))
            finally:
                set_memory_planning(True)
        print(f"  {side:>5d}x{side:<5d} {fmt_ms(times[0])} {fmt_ms(times[1])} {times[0] / times[1]:11.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    raw(args.quick)
    eager(args.quick)
    graph(args.quick)
    s = em.memory.stats()
    print(f"\npool: {s['num_allocs']} allocations, {s['num_cache_hits']} served from the cache "
          f"({s['num_cache_hits'] / max(s['num_allocs'], 1) * 100:.1f}%), peak reserved "
          f"{s['peak_reserved_bytes'] / (1 << 20):.1f} MiB")


if __name__ == "__main__":
    main()
