"""ember.distributed against raw mpi4py, and DDP's overhead, measured in one run.

Run: ember run -n 2 benchmarks/distributed.py     (and -n 3 for the cost model's check)
     options: --sizes 4K,64K,1M,16M,64M  --models mlp,resnet20  --steps 8  --no-ddp  --torch  --fp16-hook
     across hosts: ember run --hostfile hosts benchmarks/distributed.py (docs/distributed.md: the namespace
     hosts of tests/distributed/netns.py stand in for machines)

1. all_reduce bus bandwidth, Ember (tensor API: the collective's check, then MPI's blocking Allreduce)
   vs mpi4py's blocking Allreduce on the same NumPy buffers, interleaved so both see the same machine;
   ratio = Ember / raw.
2. DDP step time on N ranks over a single-process step with the same per-rank batch (every rank runs
   the local step at the same time, so both see the same load), with overlap (DDP's buckets) and
   without (one allreduce of all gradients after backward); with --torch, PyTorch's DDP (gloo) on the
   same architectures beside it, over its own single-process step; with --fp16-hook, DDP with
   fp16_compress_hook (half the bytes on the wire).
3. The ring-allreduce cost model t = 2(N-1)/N * bytes / B + 2(N-1) * a, fitted on this run's large and
   small messages (rank 0 prints B and a; docs/distributed.md compares them across N).
BLAS runs one thread per rank so ranks do not fight over cores.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import ember as em  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.group import state  # noqa: E402


def _size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
    return int(float(text.rstrip("KMG")) * mult)


def _fmt_bytes(n: int) -> str:
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:g} {unit}"
    return f"{n} B"


def allreduce_sweep(sizes: list, comm, MPI) -> list:  # noqa: N803
    """[(bytes, ember seconds, raw seconds)]: medians of the slowest rank's time per call.

    Both reduce the same zero-filled buffer (so neither finds it colder in cache than the other) and
    take turns going first.
    """
    rows = []
    for nbytes in sizes:
        arr = np.zeros(nbytes // 4, np.float32)
        t = em.from_numpy(arr)
        reps = max(10, min(300, int(4e8 // max(nbytes, 1))))
        times = np.zeros((reps, 2))

        def ours():
            dist.all_reduce(t)

        def raw():
            comm.Allreduce(MPI.IN_PLACE, arr)

        for i in range(reps + 3):
            pair = ((0, ours), (1, raw)) if i % 2 else ((1, raw), (0, ours))
            for col, fn in pair:
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                if i >= 3:
                    times[i - 3, col] = time.perf_counter() - t0
        comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)  # a collective takes as long as its slowest rank
        rows.append((nbytes, float(np.median(times[:, 0])), float(np.median(times[:, 1])),
                     float(np.median(times[:, 1] / times[:, 0]))))
    return rows


def bus_bandwidth(nbytes: int, seconds: float, n: int) -> float:
    """NCCL's bus bandwidth: what each link carries, 2(N-1)/N of the buffer per allreduce."""
    return nbytes / seconds * 2 * (n - 1) / n


# --- DDP ------------------------------------------------------------------------------------------
def _model(name: str):
    em.manual_seed(0)
    return em.models.get_model(name)


def _batch(name: str, b: int):
    shape = (b, 1, 28, 28) if name == "mlp" else (b, 3, 32, 32)
    return em.randn(*shape), em.randint(0, 10, (b,))


def _step_fn(net, opt, x, y, after_backward=None):
    def step():
        opt.zero_grad()
        loss = em.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        if after_backward is not None:
            after_backward()
        opt.step()
    return step


def _one_allreduce(params, comm, MPI, n):  # noqa: N803
    """No overlap: every gradient into one buffer after backward, one allreduce, copied back."""
    def reduce():
        flat = np.concatenate([p.grad.numpy().reshape(-1) for p in params])
        comm.Allreduce(MPI.IN_PLACE, flat)
        flat /= n
        pos = 0
        for p in params:
            k = p.numel()
            p.grad.numpy()[...] = flat[pos:pos + k].reshape(p.shape)
            pos += k
    return reduce


def _time(step, comm, steps: int) -> float:
    step()
    step()
    times = []
    for _ in range(steps):
        comm.Barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ddp_overhead(name: str, batch: int, steps: int, comm, MPI, fp16_hook: bool = False) -> tuple:  # noqa: N803
    """([local, ddp, one allreduce after backward, ddp with fp16_compress_hook (or nan)] s, gradient bytes, buckets)."""
    n = comm.Get_size()
    x, y = _batch(name, batch)
    local = _model(name)
    t_local = _time(_step_fn(local, em.optim.SGD(local.parameters(), lr=0.01), x, y), comm, steps)
    ddp = dist.DistributedDataParallel(_model(name))
    t_ddp = _time(_step_fn(ddp, em.optim.SGD(ddp.parameters(), lr=0.01), x, y), comm, steps)
    plain = _model(name)
    params = list(plain.parameters())
    t_once = _time(_step_fn(plain, em.optim.SGD(params, lr=0.01), x, y, _one_allreduce(params, comm, MPI, n)),
                   comm, steps)
    t_fp16 = float("nan")
    if fp16_hook:
        from ember.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

        hooked = dist.DistributedDataParallel(_model(name))
        hooked.register_comm_hook(None, fp16_compress_hook)
        t_fp16 = _time(_step_fn(hooked, em.optim.SGD(hooked.parameters(), lr=0.01), x, y), comm, steps)
    t = [comm.allreduce(v, op=MPI.MAX) for v in (t_local, t_ddp, t_once, t_fp16)]
    nbytes = sum(p.numel() * 4 for p in params)
    return t, nbytes, len(ddp._reducer.buckets)


def torch_ddp_overhead(name: str, batch: int, steps: int, comm) -> tuple:
    """PyTorch's DDP (gloo, one thread per rank) on the same architecture: (local s, ddp s), MAX over ranks."""
    import torch
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel as TorchDDP

    sys.path.insert(0, os.path.dirname(__file__))
    from train_step import mlp, resnet20

    torch.set_num_threads(1)
    if not tdist.is_initialized():
        port = comm.bcast(_free_port() if comm.Get_rank() == 0 else None)
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.Get_rank(),
                                 world_size=comm.Get_size())
    build = {"mlp": mlp, "resnet20": resnet20}[name]
    shape = (batch, 1, 28, 28) if name == "mlp" else (batch, 3, 32, 32)
    x, y = torch.randn(*shape), torch.randint(0, 10, (batch,))

    def step_fn(net):
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        return step

    torch.manual_seed(0)
    t_local = _time(step_fn(build(torch)), comm, steps)
    torch.manual_seed(0)
    t_ddp = _time(step_fn(TorchDDP(build(torch))), comm, steps)
    return [comm.allreduce(v, op=_max_op()) for v in (t_local, t_ddp)]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _max_op():
    return state.world_transport.MPI.MAX


def fit_cost_model(rows: list, n: int) -> tuple:
    """(bandwidth B bytes/s, per-step latency a s) from the largest and smallest messages' raw times."""
    big = [r for r in rows if r[0] >= 1 << 20]
    small = min(rows, key=lambda r: r[0])
    factor = 2 * (n - 1) / n
    bw = statistics.median(factor * b / t for b, _, t, _ in big) if big else float("nan")
    alpha = max(small[2] - factor * small[0] / bw, 0.0) / (2 * (n - 1))
    return bw, alpha


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="4K,16K,64K,256K,1M,4M,16M,64M")
    p.add_argument("--models", default="mlp,resnet20")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--torch", action="store_true", help="also time PyTorch's DDP (gloo) on the same models")
    p.add_argument("--fp16-hook", action="store_true", help="also time DDP with fp16_compress_hook")
    args = p.parse_args()
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    MPI = state.world_transport.MPI
    comm = state.world_transport.comm.Dup()  # raw mpi4py's own communicator
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"ember.distributed on {n} ranks ({MPI.Get_library_version().splitlines()[0].strip()}), "
        f"{os.cpu_count()} cores")
    rows = allreduce_sweep([_size(s) for s in args.sizes.split(",")], comm, MPI)
    say("\nall_reduce, float32, in place: bus bandwidth (GB/s) and Ember / raw mpi4py")
    say(f"{'size':>10} {'ember':>9} {'mpi4py':>9} {'ratio':>7} {'paired':>7}")
    for nbytes, ours, raw, paired in rows:
        bo, br = bus_bandwidth(nbytes, ours, n) / 1e9, bus_bandwidth(nbytes, raw, n) / 1e9
        say(f"{_fmt_bytes(nbytes):>10} {bo:9.3f} {br:9.3f} {bo / br:7.3f} {paired:7.3f}")
    bw, alpha = fit_cost_model(rows, n)
    say(f"\nring model fit (raw mpi4py): B = {bw / 1e9:.2f} GB/s, a = {alpha * 1e6:.1f} us per step")
    for nbytes, _, raw, _ in rows:
        pred = 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * alpha
        say(f"  {_fmt_bytes(nbytes):>10}: measured {raw * 1e3:8.3f} ms, model {pred * 1e3:8.3f} ms")
    if not args.no_ddp:
        say(f"\nDDP step on {n} ranks / single-process step, same per-rank batch {args.batch}")
        say(f"{'model':>10} {'grads':>9} {'buckets':>7} {'local ms':>9} {'ddp ms':>9} {'ratio':>6} "
            f"{'no-overlap ms':>13} {'ratio':>6}" + (f" {'fp16-hook ms':>12} {'ratio':>6}" if args.fp16_hook else ""))
        for name in args.models.split(","):
            (tl, td, to, th), nbytes, nb = ddp_overhead(name, args.batch, args.steps, comm, MPI, args.fp16_hook)
            say(f"{name:>10} {_fmt_bytes(nbytes):>9} {nb:7d} {tl * 1e3:9.2f} {td * 1e3:9.2f} {td / tl:6.3f} "
                f"{to * 1e3:13.2f} {to / tl:6.3f}" + (f" {th * 1e3:12.2f} {th / tl:6.3f}" if args.fp16_hook else ""))
        if args.torch:
            say(f"\nPyTorch DDP (gloo) on {n} ranks / its single-process step, same per-rank batch {args.batch}")
            say(f"{'model':>10} {'local ms':>9} {'ddp ms':>9} {'ratio':>6}")
            for name in args.models.split(","):
                tl, td = torch_ddp_overhead(name, args.batch, args.steps, comm)
                say(f"{name:>10} {tl * 1e3:9.2f} {td * 1e3:9.2f} {td / tl:6.3f}")
    comm.Free()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
