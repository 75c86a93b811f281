"""The parameter server on 2 workers + 1 server: sync mode equals single-process SGD on the summed batch;
async mode with bounded staleness trains an MLP on the MNIST sample."""

import numpy as np

import ember as em
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F
from ember.distributed import ps

B, STEPS = 4, 20


def mlp(seed=0):
    em.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)).to(em.float64)


def batch(step, n):
    rng = np.random.default_rng(step)
    return em.tensor(rng.standard_normal((n * B, 5))), em.tensor(rng.standard_normal((n * B, 2)))


def sync_equals_sgd(kv):
    w, n = kv.rank, kv.num_workers
    net = mlp(seed=w)  # worker 0's initial values are the ones kept
    params = list(net.parameters())
    keys = [f"p{i}" for i in range(len(params))]
    kv.init(keys, params)
    kv.set_optimizer(em.optim.SGD, lr=0.1, momentum=0.9)
    for step in range(STEPS):
        kv.pull(keys, out=params)
        net.zero_grad()
        x, y = batch(step, n)
        mine = slice(w * B, (w + 1) * B)
        # each worker's share of the whole batch's mean loss: the pushes sum to its gradient
        loss = ((net(x[mine]) - y[mine]) ** 2).sum() / (n * B * 2)
        loss.backward()
        kv.push(keys, [p.grad for p in params])
    kv.pull(keys, out=params)
    ref = mlp(seed=0)
    opt = em.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(step, n)
        F.mse_loss(ref(x), y).backward()
        opt.step()
    for p, q in zip(params, ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-12)
    print(f"worker {w}: sync parameter server == single-process SGD", flush=True)


def async_trains_mnist(kv):
    w, n = kv.rank, kv.num_workers
    data = em.datasets.mnist_sample()
    x_all, y_all = data.train.tensors
    x_all = x_all.reshape(len(y_all), -1)
    x_test, y_test = data.test.tensors
    em.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    params = list(net.parameters())
    keys = list(range(100, 100 + len(params)))
    kv.init(keys, params)
    kv.set_optimizer("sgd", lr=0.2, rescale_grad=1.0 / n)
    shard = np.arange(w, len(y_all), n)
    rng = np.random.default_rng(w)
    for _ in range(120):
        kv.pull(keys, out=params)
        idx = rng.choice(shard, 64)
        net.zero_grad()
        F.cross_entropy(net(x_all[idx]), y_all[idx]).backward()
        kv.push(keys, [p.grad for p in params])
    kv.pull(keys, out=params)
    acc = (net(x_test.reshape(len(y_test), -1)).argmax(dim=1) == y_test).float().mean().item()
    assert acc > 0.8, acc
    print(f"worker {w}: async parameter server reached {acc:.3f} test accuracy", flush=True)


def main():
    import sys

    dist.init_process_group()
    if sys.argv[1] == "sync":
        kv = ps.create("dist_sync")  # servers serve here, and end when the workers have closed the store
        assert kv.num_workers == dist.get_world_size() - 1 and not ps.is_server()
        sync_equals_sgd(kv)
        try:
            kv.pull("never-initialised", out=em.zeros(1))
        except dist.DistError as e:
            assert "pull on worker" in str(e) and "was never initialised" in str(e), e
        else:
            raise AssertionError("pulling an unknown key must fail")
    else:
        kv = ps.create("dist_async", max_staleness=2)
        async_trains_mnist(kv)
    kv.close()


if __name__ == "__main__":
    main()
