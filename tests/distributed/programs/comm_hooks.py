"""DDP communication hooks on 2 ranks: each hook's gradients against a NumPy emulation (exactly) and against
PyTorch's DDP with the same hook (gloo, closely: the local gradients differ in their last bits), eager and jitted.
PyTorch's bf16_compress_hook needs NCCL (on gloo its process exits), so bf16 is checked on the emulation alone.
"""

import ml_dtypes
import numpy as np
import torch
import torch.distributed as tdist
from mpi4py import MPI
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as torch_hooks

import ember as em
import ember.distributed as dist
from ember.distributed.algorithms.ddp_comm_hooks import default_hooks

B, D_IN, D_OUT = 4, 6, 3
WIRE = {"allreduce_hook": None, "fp16_compress_hook": np.float16, "bf16_compress_hook": ml_dtypes.bfloat16,
        "fp16_compress_wrapper": np.float16}


def ember_model():
    em.manual_seed(0)
    return em.nn.Sequential(em.nn.Linear(D_IN, 16), em.nn.Tanh(), em.nn.Linear(16, 16), em.nn.Tanh(),
                            em.nn.Linear(16, D_OUT))


def torch_model(like):
    net = torch.nn.Sequential(torch.nn.Linear(D_IN, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                              torch.nn.Linear(16, D_OUT))
    with torch.no_grad():
        for p, q in zip(net.parameters(), like.parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy().copy()))
    return net


def data(r, step):
    rng = np.random.default_rng(100 * step + r)
    return rng.standard_normal((B, D_IN)).astype(np.float32), rng.standard_normal((B, D_OUT)).astype(np.float32)


def ember_hook(name):
    if name == "fp16_compress_wrapper":
        return default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook)
    return getattr(default_hooks, name)


def torch_hook(name):
    if name == "fp16_compress_wrapper":
        return torch_hooks.fp16_compress_wrapper(torch_hooks.allreduce_hook)
    return getattr(torch_hooks, name)


def expected(local_grads, wire, n):
    """The hook's result from every rank's local gradient: cast, divide by n, sum in the wire dtype, cast back."""
    if wire is None:
        return sum(g / np.float32(n) for g in local_grads)
    parts = [(g.astype(wire) / wire(n)).astype(wire) for g in local_grads]
    total = parts[0]
    for p in parts[1:]:
        total = (total + p).astype(wire)  # each addition rounds to the wire dtype
    return total.astype(np.float32)


def check_hook(name, r, n, jit):
    net = ember_model()
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=0.0005)  # several buckets
    ddp.register_comm_hook(None, ember_hook(name))
    assert len(ddp._reducer.buckets) > 1
    x, y = data(r, 0)

    def step(xb, yb):
        ddp.zero_grad()
        em.nn.functional.mse_loss(ddp(xb), yb).backward()

    run = em.jit(step) if jit else step
    for _ in range(2 if jit else 1):  # jitted: the second call runs the traced program
        run(em.tensor(x), em.tensor(y))
    ours = [p.grad.numpy().copy() for p in net.parameters()]
    if jit:  # the hooks' casts and allreduces are nodes of the traced program
        ops = [node.op_name for node in run.entries()[-1].optimized.nodes if node.kind == "op"]
        assert ops.count("dist_all_reduce") == len(ddp._reducer.buckets), ops

    ref = ember_model()  # the local gradients, every rank's, for the emulation
    em.nn.functional.mse_loss(ref(em.tensor(x)), em.tensor(y)).backward()
    local = [p.grad.numpy() for p in ref.parameters()]
    every = [None] * n
    dist.all_gather_object(every, local)
    for i, got in enumerate(ours):
        want = expected([every[k][i] for k in range(n)], WIRE[name], n)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} parameter {i}")

    if WIRE[name] is ml_dtypes.bfloat16:
        print(f"rank {r}: {name} {'jitted' if jit else 'eager'} == emulation", flush=True)
        return
    tnet = torch_model(ember_model())
    tddp = torch.nn.parallel.DistributedDataParallel(tnet, bucket_cap_mb=0.0005)
    tddp.register_comm_hook(None, torch_hook(name))
    torch.nn.functional.mse_loss(tddp(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    rtol = {None: 1e-5, np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}[WIRE[name]]
    for i, (got, p) in enumerate(zip(ours, tnet.parameters())):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=rtol, atol=1e-6, err_msg=f"{name} vs torch, parameter {i}")
    print(f"rank {r}: {name} {'jitted' if jit else 'eager'} == emulation and torch", flush=True)


def errors():
    ddp = dist.DistributedDataParallel(ember_model())
    ddp.register_comm_hook(None, lambda state, bucket: bucket.buffer())  # not a Future
    try:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    except RuntimeError as e:
        assert "can only be called once" in str(e)
    else:
        raise AssertionError("a second hook must be refused")
    try:
        ddp(em.ones(2, D_IN)).sum().backward()
    except TypeError as e:
        assert "returned Tensor; it must return a Future" in str(e), e
    else:
        raise AssertionError("a hook that returns no Future must fail")


def main():
    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    port = MPI.COMM_WORLD.bcast(__import__("tests.distributed.launch", fromlist=["free_port"]).free_port()
                                if r == 0 else None)
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=n)
    for name in WIRE:
        check_hook(name, r, n, jit=False)
    check_hook("fp16_compress_hook", r, n, jit=True)
    check_hook("bf16_compress_hook", r, n, jit=True)
    errors()
    print(f"rank {r}: hook errors", flush=True)
    tdist.destroy_process_group()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
