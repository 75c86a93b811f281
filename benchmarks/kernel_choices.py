"""Every convolution algorithm that applies to each layer of the benchmark networks, timed against the others and
against PyTorch: the evidence each hand-written kernel must show to keep its place, and the data for the
thresholds in ember.kernels.conv's table.

Run: python benchmarks/kernel_choices.py [--threads N] [--rounds N] [--cpu-time] [--only NAME]
Per layer and direction (forward, input gradient, weight gradient), each algorithm of ember.kernels.conv whose
rule admits the shape is run directly on the same arrays (`*` marks the one the selection picks), PyTorch's
convolution beside them. With --cpu-time the clock is the process's CPU time (one thread only): comparisons of
kernels that stay fair on a busy machine, since waiting for a core is not counted. Benchmark as users run: unset
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this command; the first line names the CPU and the BLAS kernels.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import CPU_CLOCK, interleaved  # noqa: E402

from ember.kernels import conv, machine, parallel, selection  # noqa: E402

# (network, layer, input shape, out channels, kernel, stride, padding, groups)
LAYERS = [
    ("LeNet-5 b64", "conv1", (64, 1, 28, 28), 6, 5, 1, 2, 1),
    ("LeNet-5 b64", "conv2", (64, 6, 14, 14), 16, 5, 1, 0, 1),
    ("ResNet-20 b32", "stem", (32, 3, 32, 32), 16, 3, 1, 1, 1),
    ("ResNet-20 b32", "stage 1", (32, 16, 32, 32), 16, 3, 1, 1, 1),
    ("ResNet-20 b32", "stage 2 in", (32, 16, 32, 32), 32, 3, 2, 1, 1),
    ("ResNet-20 b32", "shortcut 2", (32, 16, 32, 32), 32, 1, 2, 0, 1),
    ("ResNet-20 b32", "stage 2", (32, 32, 16, 16), 32, 3, 1, 1, 1),
    ("ResNet-20 b32", "stage 3 in", (32, 32, 16, 16), 64, 3, 2, 1, 1),
    ("ResNet-20 b32", "stage 3", (32, 64, 8, 8), 64, 3, 1, 1, 1),
    ("ResNet-18 b1", "stem", (1, 3, 224, 224), 64, 7, 2, 3, 1),
    ("ResNet-18 b1", "layer1", (1, 64, 56, 56), 64, 3, 1, 1, 1),
    ("ResNet-18 b1", "layer2", (1, 128, 28, 28), 128, 3, 1, 1, 1),
    ("ResNet-18 b1", "layer3", (1, 256, 14, 14), 256, 3, 1, 1, 1),
    ("ResNet-18 b1", "layer4", (1, 512, 7, 7), 512, 3, 1, 1, 1),
    ("ResNet-18 b32", "layer1", (32, 64, 56, 56), 64, 3, 1, 1, 1),
    ("ResNet-18 b32", "layer3", (32, 256, 14, 14), 256, 3, 1, 1, 1),
    ("MobileNetV2 b1", "stem", (1, 3, 224, 224), 32, 3, 2, 1, 1),
    ("MobileNetV2 b1", "expand 1x1", (1, 96, 56, 56), 24, 1, 1, 0, 1),
    ("MobileNetV2 b1", "depthwise", (1, 144, 56, 56), 144, 3, 1, 1, 144),
    ("MobileNetV2 b32", "expand 1x1", (32, 24, 56, 56), 144, 1, 1, 0, 1),
    ("MobileNetV2 b32", "depthwise", (32, 144, 56, 56), 144, 3, 1, 1, 144),
]


def _problems(x_shape, out_channels, k, stride, padding, groups):
    """(direction, algorithms list, problem tuple, torch function) for the three directions of one layer."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1] // groups, k, k)) * 0.1).astype(np.float32)
    pad, st, dil = (padding,) * 4, (stride, stride), (1, 1)
    oh = (x_shape[2] + 2 * padding - k) // stride + 1
    ow = (x_shape[3] + 2 * padding - k) // stride + 1
    g = rng.standard_normal((x_shape[0], out_channels, oh, ow)).astype(np.float32)
    tx, tw, tg = torch.tensor(x), torch.tensor(w), torch.tensor(g)
    backward = torch.ops.aten.convolution_backward

    def torch_grad(mask):
        return lambda: backward(tg, tx, tw, None, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], groups, mask)

    return [
        ("forward", conv.CONV2D_ALGORITHMS, (np, x, w, st, pad, dil, groups),
         lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding, groups=groups)),
        ("input grad", conv.CONV_TRANSPOSE2D_ALGORITHMS, (np, g, w, st, pad, dil, groups, tuple(x_shape[2:])),
         torch_grad([True, False, False])),
        ("weight grad", conv.CONV2D_WEIGHT_GRAD_ALGORITHMS, (np, x, g, st, pad, dil, groups, (k, k)),
         torch_grad([False, True, False])),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=parallel.cores())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-time", action="store_true", help="time the process's CPU time (forces one thread)")
    parser.add_argument("--only", default="", help="only layers whose network or name contains this")
    args = parser.parse_args()
    threads = 1 if args.cpu_time else args.threads
    parallel.set_num_threads(threads)
    torch.set_num_threads(threads)
    clock = CPU_CLOCK if args.cpu_time else time.perf_counter
    print(f"{machine.describe()}; torch {torch.__version__}; {threads} thread(s); "
          f"{'CPU time' if args.cpu_time else 'wall time'}, best of {args.rounds} rounds")
    for net, layer, x_shape, out_channels, k, stride, padding, groups in LAYERS:
        if args.only and args.only not in net and args.only not in layer:
            continue
        for direction, listed, problem, torch_fn in _problems(x_shape, out_channels, k, stride, padding, groups):
            chosen = selection.choose(direction, listed, *problem).name
            fns = {"torch": torch_fn}
            for algorithm in listed:
                if algorithm.applies(*problem) and algorithm.run is not None:
                    fns[algorithm.name] = (lambda a=algorithm: a.run(*problem))
            times = interleaved(fns, rounds=args.rounds, clock=clock, min_time=0.05)
            base = times["torch"]
            cells = [f"{name}{'*' if name == chosen else ''} {t * 1e3:.3f} ms ({t / base:.2f}x)"
                     for name, t in sorted(times.items(), key=lambda kv: kv[1])]
            print(f"{net:15s} {layer:11s} {str(x_shape):18s} {out_channels:4d} {k}/{stride} g{groups:<3d} "
                  f"{direction:11s} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
