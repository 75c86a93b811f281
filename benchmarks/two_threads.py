"""One convolution on two threads, three ways, in alternating windows: Ember's pool splitting the batch, two
threads each running half the batch on one thread, and PyTorch (channels-last oneDNN) on two threads.

Run: python benchmarks/two_threads.py [--windows N] [--seconds S] [--shape N,C,H,W]
Each window times one way for S seconds (after 50 ms untimed, so that the previous way's threads wind down) and
prints the median call; the ways take turns, so a slow stretch of a shared machine falls on all three. On a
quiet machine the pool's split takes a little more than half of one thread's time and the halves' threads each
take half; a window where the split alone slows is a slowdown inside Ember's pool or its shared arrays, not the
machine (docs/performance.md, fourteenth pass).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import machine_line  # noqa: E402

import ember as em  # noqa: E402

WARM = 0.05  # seconds of untimed calls at the start of each window


def _median_ms(fn, seconds: float) -> float:
    """The median of fn's calls over `seconds`, in ms, after WARM seconds of untimed calls."""
    start = time.perf_counter()
    while time.perf_counter() - start < WARM:
        fn()
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _halves_ms(x, w, seconds: float) -> tuple[float, float]:
    """Each half of the batch convolved on one thread of its own, both threads at once: their median calls, ms."""
    em.set_num_threads(1)
    half = x.shape[0] // 2
    parts = [em.tensor(x.numpy()[:half].copy()), em.tensor(x.numpy()[half:].copy())]
    results = [0.0, 0.0]

    def run(k):
        results[k] = _median_ms(lambda: em.nn.functional.conv2d(parts[k], w, padding=1), seconds)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    em.set_num_threads(2)
    return results[0], results[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--shape", default="32,16,32,32", help="the input (N, C, H, W); C filters of 3 x 3, padding 1")
    args = ap.parse_args()
    n, c, h, wd = (int(v) for v in args.shape.split(","))
    torch.set_num_threads(2)
    em.set_num_threads(2)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w_np = (rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32)
    x, w = em.tensor(x_np), em.tensor(w_np)
    tx = torch.from_numpy(x_np).contiguous(memory_format=torch.channels_last)
    tw = torch.from_numpy(w_np).contiguous(memory_format=torch.channels_last)
    print(machine_line())
    print(f"conv2d {tuple(x_np.shape)} by {tuple(w_np.shape)}, padding 1, medians in ms")
    print(f"{'window':>6} {'Ember split':>12} {'Ember halves':>14} {'PyTorch':>8}")
    with torch.no_grad():
        for k in range(args.windows):
            split = _median_ms(lambda: em.nn.functional.conv2d(x, w, padding=1), args.seconds)
            a, b = _halves_ms(x, w, args.seconds)
            ref = _median_ms(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), args.seconds)
            print(f"{k:>6} {split:>12.3f} {a:>6.3f} {b:>6.3f} {ref:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
