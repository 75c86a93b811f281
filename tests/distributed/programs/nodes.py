"""A job whose ranks may come from several `ember run --nnodes` launches: each checks the world it joined.

Prints, per rank, its rank, the world size, the sum of every rank's number over an all_reduce, and which
node (EMBER_NODE_RANK) each rank came from, as every rank sees it; with `ddp`, also trains a small model
with DistributedDataParallel and prints a checksum of its weights, which must agree on every rank.
"""

import os
import sys

import numpy as np

import ember as em
import ember.distributed as dist

dist.init_process_group()
r, n = dist.get_rank(), dist.get_world_size()
assert int(os.environ["RANK"]) == r and int(os.environ["WORLD_SIZE"]) == n, (os.environ["RANK"], r)
t = em.tensor([float(r)])
dist.all_reduce(t)
nodes = [None] * n
dist.all_gather_object(nodes, int(os.environ.get("EMBER_NODE_RANK", "0")))
print(f"rank {r} of {n}: sum {t.item():g}, nodes {nodes}, local rank {os.environ['LOCAL_RANK']}", flush=True)
if sys.argv[1:] == ["ddp"]:
    em.manual_seed(r)  # DDP copies rank 0's weights at construction
    net = dist.DistributedDataParallel(em.nn.Sequential(em.nn.Linear(8, 16), em.nn.Tanh(), em.nn.Linear(16, 1)))
    opt = em.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(r)
    for _ in range(20):
        x, y = em.tensor(rng.standard_normal((4, 8)), dtype=em.float32), em.tensor(rng.standard_normal((4, 1)),
                                                                                 dtype=em.float32)
        opt.zero_grad()
        em.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    checksum = float(sum(p.detach().double().sum().item() for p in net.parameters()))
    every = [None] * n
    dist.all_gather_object(every, checksum)
    assert len(set(every)) == 1, every
    print(f"rank {r}: ddp weights agree ({checksum:.6f})", flush=True)
dist.destroy_process_group()
