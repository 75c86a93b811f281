"""Convolution layers of the benchmark CNNs, one by one: Ember vs PyTorch, forward and forward + backward.

Run: python benchmarks/conv_layers.py [--threads N] [--rounds N]
Every conv2d layer shape of LeNet-5 (batch 64, MNIST) and ResNet-20 (batch 32, CIFAR), plus the
(32, 64, 32, 32) x (64, 64, 3, 3) layer, in float32: the forward alone, and the forward with both
gradients (`.backward()` of the output times a fixed gradient, input and weight requiring grad), Ember
and PyTorch taking turns in one process on the same data and threads. Ratios are Ember's time /
PyTorch's (lower is better); the last lines weight each layer by how often its network runs it.
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

# (network, layer, input shape, out channels, kernel, stride, padding, layers of this shape in the network)
LAYERS = [
    ("LeNet-5", "conv1", (64, 1, 28, 28), 6, 5, 1, 2, 1),
    ("LeNet-5", "conv2", (64, 6, 14, 14), 16, 5, 1, 0, 1),
    ("ResNet-20", "stem", (32, 3, 32, 32), 16, 3, 1, 1, 1),
    ("ResNet-20", "stage 1", (32, 16, 32, 32), 16, 3, 1, 1, 6),
    ("ResNet-20", "stage 2 in", (32, 16, 32, 32), 32, 3, 2, 1, 1),
    ("ResNet-20", "shortcut 2", (32, 16, 32, 32), 32, 1, 2, 0, 1),
    ("ResNet-20", "stage 2", (32, 32, 16, 16), 32, 3, 1, 1, 5),
    ("ResNet-20", "stage 3 in", (32, 32, 16, 16), 64, 3, 2, 1, 1),
    ("ResNet-20", "shortcut 3", (32, 32, 16, 16), 64, 1, 2, 0, 1),
    ("ResNet-20", "stage 3", (32, 64, 8, 8), 64, 3, 1, 1, 5),
    ("wide", "64 x 64", (32, 64, 32, 32), 64, 3, 1, 1, 1),
]


def _calls(lib, x, w, g, stride, padding):
    """(forward, forward+backward) of one layer in `lib` (ember or torch, whose APIs agree here)."""
    tx, tw, tg = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True), lib.tensor(g)
    conv2d = lib.nn.functional.conv2d

    def forward():
        with lib.no_grad():
            conv2d(tx, tw, stride=stride, padding=padding)

    def both():
        conv2d(tx, tw, stride=stride, padding=padding).backward(tg)
        tx.grad = tw.grad = None

    return forward, both


def _steps(x_shape, out_channels, k, stride, padding):
    """(ember forward, ember forward+backward, torch forward, torch forward+backward) for one layer."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1], k, k)) * 0.1).astype(np.float32)
    oh = (x_shape[2] + 2 * padding - k) // stride + 1
    g = rng.standard_normal((x_shape[0], out_channels, oh, oh)).astype(np.float32)
    return _calls(em, x, w, g, stride, padding) + _calls(torch, x, w, g, stride, padding)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} threads {args.threads}  numpy {np.__version__}  ember {em.__version__}")
    print(machine_line())
    print(f"{'network':10s} {'layer':11s} {'input':>17s} {'out':>4s} {'k/s':>4s}   {'fwd ember':>10s} {'torch':>9s} "
          f"{'ratio':>6s}   {'fwd+bwd ember':>14s} {'torch':>9s} {'ratio':>6s}")
    totals: dict = {}
    for net, layer, x_shape, out_channels, k, stride, padding, count in LAYERS:
        ef, eb, tf, tb = _steps(x_shape, out_channels, k, stride, padding)
        t = interleaved({"ef": ef, "tf": tf, "eb": eb, "tb": tb}, rounds=args.rounds)
        print(f"{net:10s} {layer:11s} {str(x_shape):>17s} {out_channels:4d} {k}/{stride:<2d}   "
              f"{t['ef'] * 1e3:8.3f}ms {t['tf'] * 1e3:7.3f}ms {t['ef'] / t['tf']:5.2f}x   "
              f"{t['eb'] * 1e3:12.3f}ms {t['tb'] * 1e3:7.3f}ms {t['eb'] / t['tb']:5.2f}x")
        total = totals.setdefault(net, [0.0, 0.0])
        total[0] += count * t["eb"]
        total[1] += count * t["tb"]
    for net, (e, p) in totals.items():
        if net != "wide":
            print(f"{net}: every conv layer's forward + backward per step, ember {e * 1e3:.2f} ms, torch {p * 1e3:.2f} ms, "
                  f"{e / p:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
