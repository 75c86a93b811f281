"""A job whose ranks may come from several launches or hosts: each checks the world it joined.

Prints, per rank, its rank, the world size, the sum of every rank's number over an all_reduce, which
node (EMBER_NODE_RANK) and which network namespace (`ip netns identify`) each rank runs in, as every
rank sees it; with `ddp`, also trains a small model with DistributedDataParallel and prints a checksum
of its weights, which must agree on every rank; with `forever`, trains on and prints every 10th step.
"""

import os
import subprocess
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
try:
    netns = subprocess.run(["ip", "netns", "identify", str(os.getpid())], capture_output=True, text=True,
                           timeout=30).stdout.strip()
except OSError:
    netns = ""
hosts = [None] * n
dist.all_gather_object(hosts, netns)
print(f"rank {r}: namespaces {hosts}", flush=True)
if sys.argv[1:] in (["ddp"], ["forever"]):
    em.manual_seed(r)  # DDP copies rank 0's weights at construction
    net = dist.DistributedDataParallel(em.nn.Sequential(em.nn.Linear(8, 16), em.nn.Tanh(), em.nn.Linear(16, 1)))
    opt = em.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(r)
    for step in range(10**9 if sys.argv[1] == "forever" else 20):
        x, y = em.tensor(rng.standard_normal((4, 8)), dtype=em.float32), em.tensor(rng.standard_normal((4, 1)),
                                                                                 dtype=em.float32)
        opt.zero_grad()
        em.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
        if sys.argv[1] == "forever" and step % 10 == 0:
            print(f"rank {r}: step {step}", flush=True)
    checksum = float(sum(p.detach().double().sum().item() for p in net.parameters()))
    every = [None] * n
    dist.all_gather_object(every, checksum)
    assert len(set(every)) == 1, every
    print(f"rank {r}: ddp weights agree ({checksum:.6f})", flush=True)
dist.destroy_process_group()
