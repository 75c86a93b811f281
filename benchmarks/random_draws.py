"""Random draws: Ember's PyTorch-compatible generator against PyTorch's, both in this process.

Run: python benchmarks/random_draws.py [--size N] [--rounds R]
Times rand, randn, uniform_(a, b) and randperm at one size, float32 and float64, the two libraries taking
turns (a shared machine's slow spells fall on both), and prints Ember/PyTorch ratios. Both draw the same
numbers (checked here too). With EMBER_FUSION_BACKEND=numpy Ember runs its NumPy paths (what runs without
Numba); float32 normals there evaluate aten's Cephes polynomials with emulated fused multiply-adds.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import interleaved, machine_line  # noqa: E402

import ember as em  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    n = args.size
    torch.set_num_threads(1)
    print(f"{machine_line()}; torch {torch.__version__} (1 thread); "
          f"EMBER_FUSION_BACKEND={os.environ.get('EMBER_FUSION_BACKEND', 'auto')}")
    cases = {
        "rand": (lambda d: em.rand(n, dtype=d), lambda d: torch.rand(n, dtype=d)),
        "randn": (lambda d: em.randn(n, dtype=d), lambda d: torch.randn(n, dtype=d)),
        "uniform_(-0.3, 0.7)": (lambda d: em.empty(n, dtype=d).uniform_(-0.3, 0.7),
                                lambda d: torch.empty(n, dtype=d).uniform_(-0.3, 0.7)),
    }
    for label, (ours, theirs) in cases.items():
        for e_dtype, t_dtype in ((em.float32, torch.float32), (em.float64, torch.float64)):
            em.manual_seed(0), torch.manual_seed(0)
            # (NumPy's float64 log/sin/cos, which run without Numba, may differ from libm's in the last bit)
            np.testing.assert_allclose(ours(e_dtype).numpy(), theirs(t_dtype).numpy(), rtol=1e-15, err_msg=label)
            best = interleaved({"ember": lambda: ours(e_dtype), "torch": lambda: theirs(t_dtype)}, args.rounds)
            print(f"{label:20s} {e_dtype.name:8s} n={n}: ember {best['ember'] * 1e3:7.2f} ms, "
                  f"torch {best['torch'] * 1e3:7.2f} ms, ratio {best['ember'] / best['torch']:.2f}")
    best = interleaved({"ember": lambda: em.randperm(n), "torch": lambda: torch.randperm(n)}, args.rounds)
    print(f"{'randperm':20s} {'int64':8s} n={n}: ember {best['ember'] * 1e3:7.2f} ms, "
          f"torch {best['torch'] * 1e3:7.2f} ms, ratio {best['ember'] / best['torch']:.2f}")


if __name__ == "__main__":
    main()
