"""A data-parallel job that checkpoints every few steps and resumes from its last checkpoint when started again.

argv: CHECKPOINT KILL_AT FINAL. On the first attempt (EMBER_RESTART_COUNT=0) rank 1 kills itself (SIGKILL)
after step KILL_AT (-1: never); `ember run --max-restarts` then starts the job again, which resumes from
CHECKPOINT. Rank 0 writes the final weights and optimizer state to FINAL.
"""

import os
import signal
import sys

import numpy as np

import ember as em
import ember.distributed as dist
from ember.distributed.checkpoint import load_on_main, save_on_main
from ember.distributed.elastic import restart_count

STEPS, EVERY, B = 24, 5, 4
ckpt, kill_at, final = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dist.init_process_group()
r, n = dist.get_rank(), dist.get_world_size()
em.manual_seed(0)
net = em.nn.Sequential(em.nn.Linear(6, 16), em.nn.Tanh(), em.nn.Linear(16, 2))
ddp = dist.DistributedDataParallel(net)
opt = em.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
sched = em.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)  # state that changes between steps
state = load_on_main(ckpt, missing_ok=True)
start = 0
if state is not None:
    ddp.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    start = int(state["step"])
    print(f"rank {r}: attempt {restart_count()} resumes at step {start}", flush=True)
for step in range(start, STEPS):
    rng = np.random.default_rng(step)  # the data of a step, whichever attempt runs it
    x = em.tensor(rng.standard_normal((n * B, 6)), dtype=em.float32)[r * B:(r + 1) * B]
    y = em.tensor(rng.standard_normal((n * B, 2)), dtype=em.float32)[r * B:(r + 1) * B]
    opt.zero_grad()
    em.nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()
    sched.step()
    if (step + 1) % EVERY == 0:
        save_on_main({"model": ddp.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                      "step": step + 1}, ckpt)
    if restart_count() == 0 and r == 1 and step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
save_on_main({"model": ddp.state_dict(), "optimizer": opt.state_dict()}, final)
print(f"rank {r}: finished {STEPS} steps", flush=True)
dist.destroy_process_group()
