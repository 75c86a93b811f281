"""Batch norm and ReLU gradients: the composite rules (before) vs the fused ops (after), A/B in one process.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/batch_norm.py [--repeat N] [--threads N]
Times ResNet-20's three batch-norm layer shapes (batch 32, CIFAR), forward and backward, ReLU's backward,
and a whole ResNet-20 training step (eager, and ember.jit traced under each set of rules), the old rules
and the new ops interleaved, with PyTorch's time for the same work. "old" is the rule of ~15 Ember ops
for batch norm's gradient and where(out > 0, g, 0) for ReLU's, with the NumPy forward kernel. With
EMBER_FUSION_BACKEND=numpy "new" is the new ops' NumPy kernels (what runs without Numba).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import best_time, fmt_ms  # noqa: E402

import ember as em  # noqa: E402
from ember.op import OPS  # noqa: E402
from ember.ops import nn_extra  # noqa: E402

SHAPES = [(32, 16, 32, 32), (32, 32, 16, 16), (32, 64, 8, 8)]


def _old_bn_vjp(self, ctx, gy, gmean=None, gvar=None):
    gx, gw, gb = nn_extra._batch_norm_vjp_in_ops(ctx.input(0), ctx.input(1), ctx.output_at(1), ctx.output_at(2),
                                                 gy, gmean, gvar, ctx.attrs["eps"])
    return gx, (gw if ctx.needs_grad(1) else None), (gb if ctx.needs_grad(2) else None)


def _old_bn_kernel(self, xp, x, w, b, eps):
    """The NumPy forward kernel as it was (float32 sums for float32 input)."""
    from ember.ops.opmath import rounded, upcast

    dtype = x.dtype
    x = upcast(x)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // c
    shape = (1, c) + (1,) * (x.ndim - 2)
    mean = x.sum(axis=axes, dtype=x.dtype) / n
    xc = x - mean.reshape(shape)
    var = (xc * xc).sum(axis=axes, dtype=x.dtype) / n
    scale = 1.0 / xp.sqrt(var + eps)
    if w is not None:
        scale = scale * upcast(w)
    xc *= scale.reshape(shape).astype(x.dtype, copy=False)
    if b is not None:
        xc += upcast(b).reshape(shape).astype(x.dtype, copy=False)
    return rounded(xc, dtype), mean.astype(x.dtype, copy=False), var.astype(x.dtype, copy=False)


def _old_relu_grad(c, g):
    return em.where(c.output > 0, g, 0.0)


@contextlib.contextmanager
def old_rules():
    """The rules as they were: composite batch-norm gradient, where(gt) for ReLU, the old NumPy forward kernel."""
    vjp, kernel, relu_grad = nn_extra.BatchNormOp.vjp, nn_extra.BatchNormOp.kernel, OPS["relu"].grad
    nn_extra.BatchNormOp.vjp, nn_extra.BatchNormOp.kernel, OPS["relu"].grad = _old_bn_vjp, _old_bn_kernel, \
        _old_relu_grad
    try:
        yield
    finally:
        nn_extra.BatchNormOp.vjp, nn_extra.BatchNormOp.kernel, OPS["relu"].grad = vjp, kernel, relu_grad


def _ab(label, fn_old, fn_new, fn_torch, repeat):
    t_old = t_new = t_th = float("inf")
    for _ in range(repeat):  # interleaved, best of each
        with old_rules():
            t_old = min(t_old, best_time(fn_old, repeat=1))
        t_new = min(t_new, best_time(fn_new, repeat=1))
        t_th = min(t_th, best_time(fn_torch, repeat=1))
    print(f"{label:<34} old {fmt_ms(t_old):>9}  new {fmt_ms(t_new):>9}  old/new {t_old / t_new:5.2f}x"
          f"  torch {fmt_ms(t_th):>9}  new/torch {t_new / t_th:5.2f}x", flush=True)


def bench_layers(repeat: int) -> None:
    r = np.random.default_rng(0)
    for shape in SHAPES:
        c = shape[1]
        x = r.standard_normal(shape).astype(np.float32)
        g = r.standard_normal(shape).astype(np.float32)
        w, b = np.ones(c, np.float32), np.zeros(c, np.float32)
        ex, ew, eb, eg = em.tensor(x, requires_grad=True), em.tensor(w, requires_grad=True), \
            em.tensor(b, requires_grad=True), em.tensor(g)
        tx, tw, tb, tg = (torch.tensor(a, requires_grad=True) for a in (x, w, b, g))

        def e_fwd():
            with em.no_grad():
                em.nn.functional.batch_norm(ex, None, None, ew, eb, training=True)

        def t_fwd():
            with torch.no_grad():
                torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True)

        def e_bwd():
            y = em.nn.functional.batch_norm(ex, None, None, ew, eb, training=True)
            em.autograd.grad(y, (ex, ew, eb), eg)

        def t_bwd():
            y = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True)
            torch.autograd.grad(y, (tx, tw, tb), tg)

        def e_relu():
            y = em.relu(ex)
            em.autograd.grad(y, (ex,), eg)

        def t_relu():
            y = torch.relu(tx)
            torch.autograd.grad(y, (tx,), tg)

        name = "x".join(map(str, shape))
        _ab(f"bn forward {name}", e_fwd, e_fwd, t_fwd, repeat)
        _ab(f"bn forward+backward {name}", e_bwd, e_bwd, t_bwd, repeat)
        _ab(f"relu forward+backward {name}", e_relu, e_relu, t_relu, repeat)


def bench_resnet20(repeat: int) -> None:
    from train_step import resnet20

    r = np.random.default_rng(0)
    x_np, y_np = r.standard_normal((32, 3, 32, 32)).astype(np.float32), r.integers(0, 10, 32)
    em.manual_seed(0)
    model = resnet20(em)
    opt = em.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    t_model = resnet20(torch)
    t_opt = torch.optim.SGD(t_model.parameters(), lr=0.01, momentum=0.9)
    ex, ey, tx, ty = em.tensor(x_np), em.tensor(y_np), torch.from_numpy(x_np), torch.from_numpy(y_np)

    def e_step():
        opt.zero_grad()
        em.nn.functional.cross_entropy(model(ex), ey).backward()
        opt.step()

    def t_step():
        t_opt.zero_grad()
        torch.nn.functional.cross_entropy(t_model(tx), ty).backward()
        t_opt.step()

    for _ in range(2):
        e_step()
        t_step()
    _ab("resnet20 eager train step (b32)", e_step, e_step, t_step, repeat)

    def jitted():
        em.manual_seed(0)
        m = resnet20(em)
        o = em.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

        def step(x, y):
            o.zero_grad()
            loss = em.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            return loss
        return em.jit(step)

    with old_rules():
        j_old = jitted()
        j_old(ex, ey)  # traced with the old rules
    j_new = jitted()
    j_new(ex, ey)
    _ab("resnet20 jit train step (b32)", lambda: j_old(ex, ey), lambda: j_new(ex, ey), t_step, repeat)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="PyTorch threads (Ember runs its kernels on one)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    bench_layers(args.repeat)
    bench_resnet20(args.repeat)


if __name__ == "__main__":
    main()
