"""One optimizer step, Ember's compiled pass (fused=None) and tensor ops (fused=False) vs PyTorch's, interleaved.

Run: python benchmarks/optimizer_step.py [--rounds 7] [--threads 1]
Adam and SGD with momentum over ResNet-20's parameters (269,722 values in 59 tensors: the per-parameter cost)
and over one tensor of 4M values (the memory traffic), float32, the same gradients in both frameworks.
PyTorch runs its single-tensor (foreach=False), multi-tensor (foreach=True) and fused (fused=True) updates.
Each round times every variant once and the best round counts; ratios are Ember fused=None / the variant's.
Both frameworks get the same thread count (Ember's update runs on one thread).
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


def _shapes(case: str) -> list:
    if case == "resnet20":
        em.manual_seed(0)
        return [tuple(p.shape) for p in em.models.resnet20().parameters()]
    return [(4 * 1024 * 1024,)]


def _variants(optimizer: str, shapes: list) -> dict:
    """name -> a function running one step, each over its own parameters with the same values and gradients."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    options = {"lr": 1e-3} if optimizer == "Adam" else {"lr": 0.1, "momentum": 0.9}
    steps = {}
    for name, fused in (("ember fused=None", None), ("ember fused=False", False)):
        params = [em.nn.Parameter(em.tensor(v.copy())) for v in values]
        for p, g in zip(params, grads):
            p.grad = em.tensor(g)
        steps[name] = getattr(em.optim, optimizer)(params, fused=fused, **options).step
    for name, switch in (("torch foreach=False", {"foreach": False}), ("torch foreach=True", {"foreach": True}),
                         ("torch fused=True", {"fused": True})):
        params = [torch.nn.Parameter(torch.tensor(v)) for v in values]
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        steps[name] = getattr(torch.optim, optimizer)(params, **switch, **options).step
    for step in steps.values():  # the state, and Ember's compiled passes, made before timing
        step()
        step()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    em.set_num_threads(args.threads)
    print(machine_line(), f"; {args.threads} thread(s)")
    for optimizer in ("Adam", "SGD"):
        for case in ("resnet20", "4M values"):
            best = interleaved(_variants(optimizer, _shapes(case)), args.rounds)
            ours = best["ember fused=None"]
            print(f"\n{optimizer}, {case}: us per step (ratio: ember fused=None / this)")
            for name, seconds in best.items():
                print(f"  {name:20s} {seconds * 1e6:10.1f} us  {ours / seconds:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
