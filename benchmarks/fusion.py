"""Elementwise fusion: a 6-op chain on 4M float32 elements, fused jit vs eager Ember vs PyTorch eager.

Run: python benchmarks/fusion.py [--n N] [--threads T]
All variants run in this process on the same data. Ratios are competitor time / fused time
(higher means the fused kernel is faster). The fused kernels are built before timing (Numba
compiles once, then loads from its disk cache in later runs).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import best_time, fmt_ms  # noqa: E402

import ember as em  # noqa: E402
from ember.graph import codegen  # noqa: E402


def arith_chain(x):
    """mul, add, relu, mul, sub, abs."""
    y = x * 1.5
    y = y + 0.5
    y = y.relu()
    y = y * x
    y = y - 0.25
    return y.abs()


def tanh_chain(x):
    """mul, add, tanh, mul, sub, abs (one transcendental)."""
    y = x * 1.5
    y = y + 0.5
    y = y.tanh()
    y = y * x
    y = y - 0.25
    return y.abs()


def _fused(chain, backend):
    codegen.set_backend(backend)
    fn = em.jit(chain, passes=["fusion"])
    return fn


def run(chain, x_np, label):
    x_em = em.tensor(x_np)
    x_t = torch.from_numpy(x_np)
    fused = {b: _fused(chain, b) for b in ("auto", "numpy")}
    expect = chain(x_em).numpy()
    timings = {}
    for backend, fn in fused.items():
        codegen.set_backend(backend)
        out = fn(x_em).numpy()  # builds (and compiles) the kernel
        np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)
        timings[f"fused jit ({backend})"] = best_time(lambda fn=fn: fn(x_em))
    codegen.set_backend(None)
    timings["eager Ember"] = best_time(lambda: chain(x_em))
    timings["PyTorch eager"] = best_time(lambda: chain(x_t))
    base = timings["fused jit (auto)"]
    region = next(n.attrs["region"] for n in fused["auto"].lower(x_em, optimized=True).nodes
                  if n.op_name == "fused_elementwise")
    print(f"\n{label}  [auto renderer: {codegen.choose_renderer(region).name}]")
    for name, t in timings.items():
        print(f"  {name:22s} {fmt_ms(t)}   {t / base:6.2f}x the fused time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4 * 1024 * 1024, help="elements")
    parser.add_argument("--threads", type=int, default=None, help="PyTorch intra-op threads (default: its own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    print(f"{args.n} float32 elements; PyTorch threads: {torch.get_num_threads()}; fused kernels: 1 thread")
    run(arith_chain, x, "x*1.5 + 0.5 -> relu -> *x -> -0.25 -> abs")
    run(tanh_chain, x, "x*1.5 + 0.5 -> tanh -> *x -> -0.25 -> abs")


if __name__ == "__main__":
    main()
