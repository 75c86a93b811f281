"""Memory planning of jitted training steps, and how rematerialisation scales with depth.

Run: python benchmarks/memory_plan.py [--quick]
1. Planned peak vs unplanned total of the intermediates of a training step (MLP 784-512-256-10,
   batch 128; ResNet-20 from ember.models, batch 32), with and without the graph optimizer, and the
   step time with the plan's arena and out= kernels vs fresh arrays. Target: planned <= half.
2. Depth sweep of an MLP of Linear(256, 256)+ReLU blocks: planned peak without rematerialisation and
   with the "sqrt" policy (Chen et al. 2016), plus the activation bytes eager autograd saves with and
   without `checkpoint_sequential`, next to PyTorch's `torch.utils.checkpoint.checkpoint_sequential`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import best_time, fmt_ms  # noqa: E402

import ember as em  # noqa: E402
from ember.autograd import Node  # noqa: E402
from ember.runtime import set_memory_planning, set_remat  # noqa: E402
from ember.runtime.memory_check import validate  # noqa: E402

MiB = 1 << 20


def training_step(model, passes):
    opt = em.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = em.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return em.jit(step, passes=passes)


def plan_of(jitted):
    return jitted.entries()[-1].plan


def report_step(name, make_model, x, y, quick):
    print(f"\n{name}")
    print(f"  {'graph passes':14s} {'steps':>6s} {'unplanned':>11s} {'planned':>10s} {'ratio':>6s} {'in place':>9s}"
          f" {'step, fresh':>12s} {'step, arena':>12s} {'speedup':>8s}")
    for label, passes in (("none", ()), ("default", None)):
        em.manual_seed(0)
        step = training_step(make_model(), passes)
        step(x, y)
        step(x, y)
        plan = plan_of(step)
        mem = validate(plan.memory_plan())
        times = []
        for memory in (False, True):
            set_memory_planning(memory)
            try:
                times.append(best_time(lambda: step(x, y), repeat=3 if quick else 5, min_time=0.05 if quick else 0.3))
            finally:
                set_memory_planning(True)
        ratio = mem.peak_bytes / mem.unplanned_bytes
        print(f"  {label:14s} {len(plan.steps):6d} {mem.unplanned_bytes / MiB:8.2f} MiB {mem.peak_bytes / MiB:7.2f} MiB"
              f" {ratio:6.2f} {mem.n_inplace:9d} {fmt_ms(times[0])} {fmt_ms(times[1])} {times[0] / times[1]:7.2f}x")


def deep_mlp(depth, width=256):
    nn = em.nn
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def saved_activation_bytes(out):
    """Bytes of non-parameter tensors the autograd graph of `out` keeps for backward."""
    seen, total, stack = set(), 0, [out.grad_fn]
    while stack:
        n = stack.pop()
        if not isinstance(n, Node) or id(n) in seen:
            continue
        seen.add(id(n))
        for t, _ in (n._saved or {}).values():
            total += t.nbytes if t.grad_fn is not None or not t.requires_grad else 0
        total += sum(d.nbytes for d, *_ in (n._out_saved or {}).values())
        stack.extend(e[0] for e in n.edges if e is not None)
    return total


def torch_saved_bytes(model, x, segments):
    """Bytes of non-leaf tensors PyTorch saves for backward (its own checkpoint hooks take precedence)."""
    total = [0]
    params = {p.data_ptr() for p in model.parameters()} | {x.data_ptr()}

    def pack(t):
        if t.data_ptr() not in params:
            total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if segments:
            from torch.utils.checkpoint import checkpoint_sequential

            out = checkpoint_sequential(model, segments, x, use_reentrant=False)
        else:
            out = model(x)
    return total[0], out


def depth_sweep(quick):
    depths = (5, 10, 20) if quick else (5, 10, 20, 40)
    batch, width = 128, 256
    print(f"\nDepth sweep: MLP of Linear({width}, {width})+ReLU blocks, batch {batch}, SGD step (jit, no passes)")
    print(f"  {'depth':>5s} {'plan peak':>11s} {'with sqrt remat':>16s} {'recomputed':>11s} {'step time':>12s}"
          f" {'with remat':>12s}")
    peaks = {}
    x, y = em.randn(batch, width), em.randint(0, 10, (batch,))
    for depth in depths:
        row = []
        for policy in (None, "sqrt"):
            set_remat(policy)
            try:
                em.manual_seed(0)
                step = training_step(deep_mlp(depth, width), ())
                step(x, y)
                step(x, y)
            finally:
                set_remat(None)
            mem = validate(plan_of(step).memory_plan())
            t = best_time(lambda: step(x, y), repeat=3, min_time=0.05 if quick else 0.2)
            row.append((mem, t))
        (m0, t0), (m1, t1) = row
        peaks[depth] = (m0.peak_bytes, m1.peak_bytes)
        print(f"  {depth:5d} {m0.peak_bytes / MiB:7.2f} MiB {m1.peak_bytes / MiB:12.2f} MiB"
              f" {m1.remat.recomputed_steps if m1.remat else 0:11d} {fmt_ms(t0)} {fmt_ms(t1)}")
    lo, hi = depths[0], depths[-1]
    g0 = peaks[hi][0] / peaks[lo][0]
    g1 = peaks[hi][1] / peaks[lo][1]
    print(f"  depth x{hi // lo}: plan peak grows {g0:.2f}x without remat, {g1:.2f}x with sqrt remat "
          f"(sqrt(x{hi // lo}) = {math.sqrt(hi / lo):.2f})")

    print(f"\nEager autograd, saved activation bytes (batch {batch}, width {width}), segments = round(sqrt(depth));"
          "\n  (PyTorch's checkpoint_sequential runs its last segment without checkpointing)")
    print(f"  {'depth':>5s} {'ember plain':>12s} {'ember ckpt':>11s} {'torch plain':>12s} {'torch ckpt':>11s}")
    xe = em.randn(batch, width, requires_grad=True)
    xt = torch.tensor(xe.detach().numpy(), requires_grad=True)
    for depth in depths:
        em.manual_seed(0)
        model = deep_mlp(depth, width)
        seg = max(1, round(math.sqrt(depth)))
        plain = saved_activation_bytes(model(xe))
        ckpt = saved_activation_bytes(em.utils.checkpoint.checkpoint_sequential(model, seg, xe))
        tmodel = torch.nn.Sequential(*[torch.nn.Linear(width, width) if i % 2 == 0 else torch.nn.ReLU()
                                       for i in range(2 * depth)], torch.nn.Linear(width, 10))
        tplain, _ = torch_saved_bytes(tmodel, xt, 0)
        tckpt, _ = torch_saved_bytes(tmodel, xt, seg)
        print(f"  {depth:5d} {plain / MiB:8.2f} MiB {ckpt / MiB:7.2f} MiB {tplain / MiB:8.2f} MiB {tckpt / MiB:7.2f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and a shorter sweep")
    args = ap.parse_args()
    np.random.seed(0)

    x, y = em.randn(128, 784), em.randint(0, 10, (128,))
    report_step("MLP 784-512-256-10, batch 128 (SGD momentum step)", lambda: em.models.mlp(784, (512, 256), 10),
                x, y, args.quick)
    try:
        from ember.models import resnet20
    except ImportError:
        resnet20 = None
    if resnet20 is not None:
        xc, yc = em.randn(32, 3, 32, 32), em.randint(0, 10, (32,))
        report_step("ResNet-20 (ember.models), batch 32, 3x32x32 (SGD momentum step)", resnet20, xc, yc, args.quick)
    depth_sweep(args.quick)


if __name__ == "__main__":
    main()
