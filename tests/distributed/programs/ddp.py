"""DDP on N ranks with per-rank batch B against single-process training on batch N*B, in float64.

Every rank also trains the single-process reference itself (same initialisation, the whole batch), so
it can compare its DDP replica after each configuration: SGD with momentum and Adam, without norm,
with BatchNorm (per-rank statistics: the reference normalises each rank's share on its own) and with
SyncBatchNorm (the reference is BatchNorm on the whole batch), each with and without gradient
accumulation through no_sync. Then: a jitted DDP step equals the eager one, unused parameters, the
sampler.
"""

import numpy as np

import ember as em
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F
from ember.runtime.settings import set_parallel

B, STEPS, D_IN, D_OUT = 4, 20, 6, 3


def model(norm, seed=0):
    em.manual_seed(seed)
    layers = [nn.Linear(D_IN, 16)]
    if norm:
        layers.append(nn.BatchNorm1d(16))
    layers += [nn.Tanh(), nn.Linear(16, 16)]
    if norm:
        layers.append(nn.BatchNorm1d(16))
    layers += [nn.Tanh(), nn.Linear(16, D_OUT)]
    return nn.Sequential(*layers).to(em.float64)


def optimizer(name, params):
    if name == "sgd":
        return em.optim.SGD(params, lr=0.1, momentum=0.9)
    if name == "plain_sgd":  # no optimizer state: the step stores only the reduced gradients
        return em.optim.SGD(params, lr=0.1)
    return em.optim.Adam(params, lr=0.01)


def batches(step, accum, n):
    """For each micro-batch: the whole batch (n*B rows) of inputs and targets."""
    rng = np.random.default_rng(1000 + step)
    return [(em.tensor(rng.standard_normal((n * B, D_IN))), em.tensor(rng.standard_normal((n * B, D_OUT))))
            for _ in range(accum)]


def reference(norm, opt_name, accum, n):
    """Single process on the whole batch (BatchNorm: each rank's share normalised on its own)."""
    net = model(norm)
    opt = optimizer(opt_name, net.parameters())
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in batches(step, accum, n):
            if norm == "bn":
                loss = sum(F.mse_loss(net(x[r * B:(r + 1) * B]), y[r * B:(r + 1) * B]) for r in range(n)) / n
            else:
                loss = F.mse_loss(net(x), y)
            loss.backward()
        opt.step()
    return net


def ddp_run(norm, opt_name, accum, r, n, jit=False, steps=STEPS, cap=0.0005):
    net = model(norm, seed=r)  # each rank starts differently: DDP copies rank 0's state at construction
    if norm == "sync":
        net = dist.SyncBatchNorm.convert_sync_batchnorm(net)
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=cap)
    opt = optimizer(opt_name, ddp.parameters())
    mine = slice(r * B, (r + 1) * B)

    def micro(x, y):
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        return loss

    def step_fn(xs, ys):
        opt.zero_grad()
        for k in range(accum - 1):
            with ddp.no_sync():
                micro(xs[k], ys[k])
        micro(xs[-1], ys[-1])
        opt.step()

    run = em.jit(step_fn) if jit else step_fn
    for step in range(steps):
        data = batches(step, accum, n)
        run([x[mine] for x, _ in data], [y[mine] for _, y in data])
    if jit:
        ops = [node.op_name for node in run.entries()[-1].optimized.nodes if node.kind == "op"]
        starts = [i for i, o in enumerate(ops) if o == "dist_all_reduce_start"]
        waits = [i for i, o in enumerate(ops) if o == "dist_all_reduce_wait"]
        assert len(starts) == len(waits) == len(ddp._reducer.buckets) > 1, ops
        # the first bucket starts while backward still has work to do before its wait
        assert any(o not in ("dist_all_reduce_start", "cat", "reshape") for o in ops[starts[0] + 1:waits[0]]), ops
    return ddp


def compare(a, b, what):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-9,
                                   err_msg=f"{what}: {name}")


def main():
    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    for norm in (None, "bn", "sync"):
        for opt_name in ("sgd", "adam"):
            for accum in (1, 2):
                what = f"norm={norm} opt={opt_name} accum={accum}"
                ddp = ddp_run(norm, opt_name, accum, r, n)
                ref = reference("bn" if norm == "bn" else norm, opt_name, accum, n)
                compare(ddp.module, ref, what)
                if norm == "sync":  # SyncBatchNorm's running statistics are those of the whole batch
                    for (name, b), rb in zip(ddp.module.named_buffers(), ref.buffers()):
                        np.testing.assert_allclose(b.numpy(), rb.numpy(), rtol=1e-6, atol=1e-9, err_msg=f"{what} {name}")
                print(f"rank {r}: ddp == single process: {what}", flush=True)
    # a jitted DDP step (allreduce start/wait nodes in the graph) equals the eager step
    for norm, parallel, opt_name in ((None, False, "sgd"), ("sync", False, "sgd"), (None, True, "sgd"),
                                     (None, False, "plain_sgd")):
        eager = ddp_run(norm, opt_name, 2, r, n, steps=6)
        set_parallel(parallel)  # True: every step through the dependency engine, reductions beside compute
        try:
            jitted = ddp_run(norm, opt_name, 2, r, n, jit=True, steps=6)
        finally:
            set_parallel("auto")
        for p, q in zip(eager.parameters(), jitted.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)
        print(f"rank {r}: jitted ddp == eager ddp: norm={norm} parallel={parallel} opt={opt_name}", flush=True)
    unused(r, n)
    sampler(r, n)
    dist.destroy_process_group()


class Branchy(nn.Module):
    """A module whose second branch is used only when asked (by some ranks, or none)."""

    def __init__(self):
        super().__init__()
        em.manual_seed(0)
        self.a = nn.Linear(3, 2).to(em.float64)
        self.b = nn.Linear(3, 2).to(em.float64)

    def forward(self, x, use_b):
        return self.a(x) + self.b(x) if use_b else self.a(x)


def unused(r, n):
    x = em.ones((2, 3), dtype=em.float64)
    ddp = dist.DistributedDataParallel(Branchy())
    ddp(x, use_b=False).sum().backward()
    try:
        ddp(x, use_b=False)
    except dist.DistError as e:
        assert "Expected to have finished reduction in the prior iteration" in str(e), e
        assert f"did not receive grad for rank {r}: 2 3" in str(e), e
    else:
        raise AssertionError("an unused parameter must fail the next forward without find_unused_parameters")
    ddp = dist.DistributedDataParallel(Branchy(), find_unused_parameters=True)
    ddp(x, use_b=False).sum().backward()
    assert ddp.module.b.weight.grad is None  # unused on every rank: left alone
    np.testing.assert_allclose(ddp.module.a.bias.grad.numpy(), [2.0, 2.0])
    ddp.zero_grad()
    ddp(x, use_b=(r == 0)).sum().backward()  # used by rank 0 only: every rank gets the average
    np.testing.assert_allclose(ddp.module.b.bias.grad.numpy(), [2.0 / n, 2.0 / n])
    print(f"rank {r}: unused parameters", flush=True)


def sampler(r, n):
    data = list(range(11))
    s = dist.DistributedSampler(data, shuffle=True, seed=3)
    s.set_epoch(2)
    mine = list(s)
    every = [None] * n
    dist.all_gather_object(every, mine)
    assert all(len(x) == len(mine) == -(-11 // n) for x in every)
    flat = [i for x in every for i in x]
    assert set(flat) == set(data)  # padding repeats a few indices, none is lost
    s.set_epoch(3)
    assert list(s) != mine or n == 1
    print(f"rank {r}: sampler", flush=True)


if __name__ == "__main__":
    main()
