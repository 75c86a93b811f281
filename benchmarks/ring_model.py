"""The ring-allreduce cost model of docs/distributed.md: predicted DDP step time and scaling efficiency.

Run: python benchmarks/ring_model.py [--bandwidth-gbit 10,100] [--latency-us 30,10] [--halving] [--compress 2]
                                    [--bucket-mb 25]

t_allreduce(S, N) = 2(N-1)/N * S / B + 2(N-1) * a   (S bytes, N ranks, bus bandwidth B, per-step latency a)

--halving: MPICH's large-message algorithm (Rabenseifner: reduce-scatter by recursive halving, all-gather by
recursive doubling) has the same bandwidth term but 2 log2(N) latency steps instead of 2(N-1).
--compress K: the gradients travel K times smaller (2: fp16_compress_hook), reduction cost not counted.

A data-parallel step on N ranks takes the compute time C of one rank's batch plus the part of the
gradient allreduce that backward does not hide. With buckets of size b filled in reverse order during
backward (about 2/3 of C), the allreduces overlap backward, so what shows is
    exposed = max(t_last, t(S) - 2/3 C)
where t_last is the allreduce of the last bucket, which can only start when backward ends. Without
overlap (one allreduce after backward) all of t(S) shows. Efficiency = C / step time (1.0 = linear).
"""

from __future__ import annotations

import argparse
import math

MODELS = {  # name: (gradient bytes in float32, compute seconds of one rank's step, the batch that takes)
    "resnet50": (25_557_032 * 4, 0.16, "batch 64 at 224x224, a GPU-class rank (~400 images/s)"),
    "transformer_lm": (413_312 * 4, 0.030, "ember.models.transformer_lm, batch 16x64, a CPU-class rank"),
}
BUCKET = 25 * 2**20  # DDP's default bucket_cap_mb=25


def allreduce(size: float, n: int, bandwidth: float, latency: float, halving: bool = False) -> float:
    """Seconds for a ring allreduce of `size` bytes on `n` ranks (halving: log2(n) latency steps each way)."""
    if n == 1:
        return 0.0
    steps = 2 * math.log2(n) if halving else 2 * (n - 1)
    return 2 * (n - 1) / n * size / bandwidth + steps * latency


def step(model: str, n: int, bandwidth: float, latency: float, bucket: float = BUCKET, halving: bool = False,
         compress: float = 1.0) -> tuple[float, float]:
    """(step seconds with overlap, step seconds without overlap) for `model` on `n` ranks."""
    size, compute, _ = MODELS[model]
    size /= compress
    bucket /= compress
    whole = allreduce(size, n, bandwidth, latency, halving)
    last = allreduce(min(bucket, size), n, bandwidth, latency, halving)
    overlapped = compute + max(last, whole - 2 / 3 * compute)
    return overlapped, compute + whole


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandwidth-gbit", default="10,100")
    p.add_argument("--latency-us", default="30,10")
    p.add_argument("--halving", action="store_true", help="log2(N) latency steps (MPICH's large-message algorithm)")
    p.add_argument("--compress", type=float, default=1.0, help="gradient bytes divided by this (2: fp16 hook)")
    p.add_argument("--bucket-mb", type=float, default=BUCKET / 2**20, help="DDP's bucket_cap_mb")
    args = p.parse_args()
    links = list(zip((float(x) for x in args.bandwidth_gbit.split(",")), (float(x) for x in args.latency_us.split(","))))
    for model, (size, compute, what) in MODELS.items():
        print(f"\n{model}: {size / 2**20:.1f} MiB of float32 gradients, compute {compute * 1e3:.0f} ms per step ({what})")
        head = "     N" + "".join(f" | {g:g} Gbit/s: step ms, eff (no overlap)" for g, _ in links)
        print(head)
        for n in (2, 4, 8, 16, 32, 64, 128, 256):
            row = f"{n:6d}"
            for gbit, lat in links:
                t, t_plain = step(model, n, gbit * 1e9 / 8, lat * 1e-6, args.bucket_mb * 2**20, args.halving,
                                  args.compress)
                row += f" | {t * 1e3:9.1f} ms {compute / t:5.2f} ({compute / t_plain:4.2f})"
            print(row)


if __name__ == "__main__":
    main()
