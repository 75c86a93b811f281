"""float32 GEMM speed: Ember's own kernel (ember.kernels.gemm) vs NumPy's BLAS vs PyTorch, on the products the
benchmark models compute.

Run: python benchmarks/gemm.py [--threads N]
All three run in this process on the same operands with the same thread count, taking turns (interleaved);
ratios are Ember's time / the competitor's (lower is better). The header names the CPU and the BLAS kernels.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import interleaved, machine_line  # noqa: E402

from ember.kernels import gemm  # noqa: E402
from ember.kernels.sgemm import sgemm  # noqa: E402

# (where it comes from, M, K, N, B transposed)
SHAPES = [
    ("LSTM step, half the batch", 16, 128, 512, False),
    ("LSTM backward step", 32, 512, 128, False),
    ("MLP layer 1 (x @ W.T)", 128, 784, 512, True),
    ("MLP layer 2 (x @ W.T)", 128, 512, 256, True),
    ("LSTM input projection", 1600, 64, 512, True),
    ("LSTM weight gradient", 512, 1600, 128, False),
    ("transformer FFN (x @ W.T)", 1024, 128, 512, True),
    ("resnet18 b1 conv 3x3x64 im2col", 64, 576, 3136, False),
    ("resnet18 b1 conv 3x3x256 im2col", 256, 2304, 196, False),
    ("square 1024", 1024, 1024, 1024, False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    print(f"Ember's kernel in use: {gemm.enabled()} (needs AVX-512 and the jit extra; EMBER_GEMM=blas turns it off)")
    if not gemm.enabled():
        return
    print(f"{'product':34s} {'M x K x N':>18s} {'ember':>9s} {'numpy':>9s} {'torch':>9s} {'GFLOP/s':>8s} "
          f"{'vs numpy':>9s} {'vs torch':>9s}")
    rng = np.random.default_rng(0)
    for name, m, k, n, b_transposed in SHAPES:
        a = rng.standard_normal((m, k), np.float32)
        b = rng.standard_normal((n, k), np.float32).T if b_transposed else rng.standard_normal((k, n), np.float32)
        out = np.empty((m, n), np.float32)
        ta, tb, tout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
        times = interleaved({"ember": lambda: sgemm(a, b, out), "numpy": lambda: np.matmul(a, b, out=out),
                             "torch": lambda: torch.matmul(ta, tb, out=tout)}, rounds=5)
        e, p, t = times["ember"], times["numpy"], times["torch"]
        print(f"{name:34s} {f'{m} x {k} x {n}':>18s} {e * 1e6:7.1f}us {p * 1e6:7.1f}us {t * 1e6:7.1f}us "
              f"{2 * m * k * n / e / 1e9:8.0f} {e / p:8.2f}x {e / t:8.2f}x")


if __name__ == "__main__":
    main()
