"""Per-op overhead on small tensors and throughput on large ones: Ember vs NumPy vs PyTorch.

Run: python benchmarks/op_overhead.py [--threads N] [--cpu-time]
All frameworks run in this process on the same data with the same thread count; ratios are
Ember time / competitor time (lower is better). With --cpu-time each small op's five variants take turns
(interleaved) and are timed by the process's CPU time, which a busy shared machine disturbs far less than
wall time; the large table stays on wall time (BLAS threads do its work).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import CPU_CLOCK, best_time, fmt_ms, fmt_us, interleaved, machine_line  # noqa: E402

import ember as em  # noqa: E402

SMALL_OPS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, np.add),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, np.multiply),
    "exp": (lambda a, b: a.exp(), lambda a, b: a.exp(), lambda a, b: np.exp(a)),
    "relu": (lambda a, b: a.relu(), lambda a, b: a.relu(), lambda a, b: np.maximum(a, 0)),
    "sum": (lambda a, b: a.sum(), lambda a, b: a.sum(), lambda a, b: a.sum()),
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, np.matmul),
    "reshape": (lambda a, b: a.reshape(-1), lambda a, b: a.reshape(-1), lambda a, b: a.reshape(-1)),
    "getitem": (lambda a, b: a[1:3], lambda a, b: a[1:3], lambda a, b: a[1:3]),
}


def _timer(cpu_time: bool, rounds: int):
    """times(fns) -> best seconds per call of each: wall time each in turn, or interleaved process CPU time."""
    if cpu_time:
        return lambda fns: interleaved(fns, rounds, clock=CPU_CLOCK, min_time=0.05)
    return lambda fns: {name: best_time(fn) for name, fn in fns.items()}


def small_op_table(size: int, cpu_time: bool = False, rounds: int = 7) -> None:
    """Per-call time of each small op in NumPy, PyTorch and Ember, without and with autograd, and the five-op
    forward+backward chain."""
    times = _timer(cpu_time, rounds)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((size, size)).astype(np.float32)
    b_np = rng.standard_normal((size, size)).astype(np.float32)
    ea, eb = em.tensor(a_np), em.tensor(b_np)
    ta, tb = torch.tensor(a_np), torch.tensor(b_np)
    ga, gb = em.tensor(a_np, requires_grad=True), em.tensor(b_np, requires_grad=True)
    tga, tgb = ta.clone().requires_grad_(), tb.clone().requires_grad_()
    clock = "process CPU time, interleaved" if cpu_time else "wall time"
    print(f"\nSmall-op overhead ({size}x{size} float32), time per call ({clock})")
    print(f"{'op':10s} {'numpy':>12s} {'torch':>12s} {'ember':>12s} {'torch+grad':>12s} {'ember+grad':>12s}"
          f" {'ember/torch':>12s} {'grad ratio':>11s}")
    ratios = []
    for name, (ef, tf, nf) in SMALL_OPS.items():
        t = times({"np": lambda: nf(a_np, b_np), "t": lambda: tf(ta, tb), "e": lambda: ef(ea, eb),
                   "tg": lambda: tf(tga, tgb), "eg": lambda: ef(ga, gb)})
        t_np, t_t, t_e, t_tg, t_eg = t["np"], t["t"], t["e"], t["tg"], t["eg"]
        ratios.append(t_eg / t_tg)
        print(f"{name:10s} {fmt_us(t_np)} {fmt_us(t_t)} {fmt_us(t_e)} {fmt_us(t_tg)} {fmt_us(t_eg)}"
              f" {t_e / t_t:11.2f}x {t_eg / t_tg:10.2f}x")
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean of ember+grad / torch+grad: {geo:.2f}x  (target <= 1.1x)")

    def ember_step():
        y = (ga * gb + ga).relu().sum()
        y.backward()
        ga.grad = gb.grad = None

    def torch_step():
        y = (tga * tgb + tga).relu().sum()
        y.backward()
        tga.grad = tgb.grad = None

    # three times the turns: a step touches far more memory than one op, and a busy machine's slow spells then last
    # longer than a turn
    t = _timer(cpu_time, rounds * 3)({"e": ember_step, "t": torch_step})
    t_e, t_t = t["e"], t["t"]
    print(f"forward+backward of (a*b+a).relu().sum(): ember {fmt_us(t_e)}  torch {fmt_us(t_t)}  ratio {t_e / t_t:.2f}x"
          "  (target <= 1.3x)")


def large_table() -> None:
    rng = np.random.default_rng(0)
    print("\nLarge tensors")
    n = 4_000_000
    a_np = rng.standard_normal(n).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    ea, eb, ta, tb = em.tensor(a_np), em.tensor(b_np), torch.tensor(a_np), torch.tensor(b_np)
    t_np, t_t, t_e = best_time(lambda: a_np + b_np), best_time(lambda: ta + tb), best_time(lambda: ea + eb)
    print(f"add 4M f32      numpy {fmt_ms(t_np)}  torch {fmt_ms(t_t)}  ember {fmt_ms(t_e)}"
          f"  ember/numpy {t_e / t_np:.2f}x  ember/torch {t_e / t_t:.2f}x")

    m = 2048
    a_np = rng.standard_normal((m, m)).astype(np.float32)
    b_np = rng.standard_normal((m, m)).astype(np.float32)
    ea, eb, ta, tb = em.tensor(a_np), em.tensor(b_np), torch.tensor(a_np), torch.tensor(b_np)
    t_np = best_time(lambda: a_np @ b_np, repeat=3)
    t_t = best_time(lambda: ta @ tb, repeat=3)
    t_e = best_time(lambda: ea @ eb, repeat=3)
    flops = 2 * m**3
    print(f"matmul {m}^2 f32 numpy {fmt_ms(t_np)}  torch {fmt_ms(t_t)}  ember {fmt_ms(t_e)}"
          f"  ember/numpy {t_e / t_np:.2f}x (target <= 1.10x)  ember/torch {t_e / t_t:.2f}x"
          f"  [{flops / t_e / 1e9:.1f} GFLOP/s]")

    x_np = rng.standard_normal((32, 64, 32, 32)).astype(np.float32)
    w_np = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
    ex, ew = em.tensor(x_np, requires_grad=True), em.tensor(w_np, requires_grad=True)
    tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)

    def ember_conv():
        em.conv2d(ex, ew, padding=1).sum().backward()
        ex.grad = ew.grad = None

    def torch_conv():
        torch.nn.functional.conv2d(tx, tw, padding=1).sum().backward()
        tx.grad = tw.grad = None

    t_e, t_t = best_time(ember_conv, repeat=3), best_time(torch_conv, repeat=3)
    print(f"conv2d fwd+bwd (32,64,32,32)*(64,64,3,3): torch {fmt_ms(t_t)}  ember {fmt_ms(t_e)}"
          f"  ember/torch {t_e / t_t:.2f}x (target <= 1.1x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for torch (NumPy's BLAS uses its own default)")
    parser.add_argument("--small", type=int, default=16, help="side of the small square tensors")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the small ops by the process's CPU time, the frameworks taking turns")
    parser.add_argument("--rounds", type=int, default=7, help="turns per small op with --cpu-time (best is kept)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"numpy {np.__version__}  torch {torch.__version__}  ember {em.__version__}  threads {args.threads}")
    print(machine_line())
    small_op_table(args.small, args.cpu_time, args.rounds)
    if not args.skip_large:
        large_table()


if __name__ == "__main__":
    main()
