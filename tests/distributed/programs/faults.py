"""A job in which rank 1 fails in some way (argv[1]); the other ranks must stop, naming it, in bounded time."""

import os
import signal
import sys
import threading
import time

import ember as em
import ember.distributed as dist

mode = sys.argv[1]
dist.init_process_group()
r = dist.get_rank()
t = em.ones(4)
dist.all_reduce(t)
if r == 1:
    if mode == "raise":
        raise ZeroDivisionError("rank 1 divided by zero")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "stop":  # frozen: alive, but silent
        os.kill(os.getpid(), signal.SIGSTOP)
    if mode == "exit":
        sys.exit(0)
    if mode == "busy":
        raise ValueError("rank 1 failed while rank 0 computes")
    if mode == "stuck":  # an endless loop in Python: its watchdog keeps beating
        while True:
            sum(range(1000))
if r == 2 and mode == "stuck":  # a deadlock (a data loader waiting on itself): alive, beating, never arriving
    threading.Event().wait()
if r == 0 and mode == "busy":  # never waits on MPI again: its watchdog must stop it
    end = time.monotonic() + 120
    while time.monotonic() < end:
        sum(range(1000))
dist.all_reduce(t)
print(f"rank {r}: finished (should not happen)", flush=True)
