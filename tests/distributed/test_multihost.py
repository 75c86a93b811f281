"""Jobs across "hosts": network namespaces joined by a bridge (tests/distributed/netns.py), each its own machine
to MPI. DDP, the parameter server and `ember run --nnodes` across them, and a host lost mid-step.

Skipped (saying why) where namespaces cannot be made: not root, no iproute2, no MPI.
"""

import os
import subprocess
import sys
import time

import pytest

from tests.distributed import netns
from tests.distributed.launch import PROGRAMS, ROOT, env, free_port, mpi_missing, nodes_command

_why = mpi_missing() or netns.unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.fixture
def hosts(tmp_path):
    def make(count):
        made = netns.Hosts(count, str(tmp_path))
        stack.append(made)
        return made.__enter__()

    stack: list = []
    yield make
    for made in stack:
        made.remove()


def _ember_run(hosts, host: int, *args, timeout: float = 240, **extra) -> subprocess.CompletedProcess:
    """`ember run ARGS` started on host `host` (Hydra reaches the other hosts through the namespace launcher)."""
    argv = hosts.command(host, [sys.executable, "-m", "ember", "run", *map(str, args)])
    return subprocess.run(argv, cwd=ROOT, env=hosts.env(env(**extra)), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def _ok(proc) -> str:
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{proc.stdout[-8000:]}"
    return proc.stdout


def _no_leftovers(hosts, count: int) -> None:
    deadline = time.monotonic() + 20
    while any(hosts.pids(i) for i in range(count)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(hosts.pids(i) for i in range(count)), [hosts.pids(i) for i in range(count)]


def test_ddp_the_parameter_server_and_nnodes_run_across_hosts(hosts):
    h = hosts(3)
    names = h.names
    with open(h.hostfile([1, 1])) as f:  # Open MPI's spelling, translated for Hydra
        assert f.read() == f"{h.addresses[0]} slots=1\n{h.addresses[1]} slots=1\n"
    hosts_n = os.path.join(h.workdir, "hosts-hydra")
    with open(hosts_n, "w") as f:  # Hydra's spelling
        f.write(f"{h.addresses[0]}:1\n{h.addresses[1]}:1\n")
    out = _ok(_ember_run(h, 0, "--hostfile", hosts_n, os.path.join(PROGRAMS, "nodes.py"), "ddp"))
    assert f"rank 0: namespaces {names[:2]}" in out and f"rank 1: namespaces {names[:2]}" in out, out
    assert "rank 0: ddp weights agree" in out and "rank 1: ddp weights agree" in out, out

    out = _ok(_ember_run(h, 0, "--hostfile", h.hostfile([1, 1, 1]), "--servers", 1, os.path.join(PROGRAMS, "ps.py"),
                         "sync"))
    assert "worker 0: sync parameter server == single-process SGD" in out, out
    assert "worker 1: sync parameter server == single-process SGD" in out, out

    # torchrun's way: one `ember run --nnodes 2` per machine, meeting at node 0's address
    port = free_port()
    procs = [subprocess.Popen(h.command(node, nodes_command(2, node, port, "nodes.py", "ddp", addr=h.addresses[0])),
                              cwd=ROOT, env=h.env(env()), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for node in (1, 0)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, text in zip(procs, outs):
        assert p.returncode == 0, text
    text = "".join(outs)
    assert f"rank 0: namespaces {names[:2]}" in text and "rank 1: ddp weights agree" in text, text
    _no_leftovers(h, 3)


def _start_forever(h, tmp_path):
    log = open(tmp_path / "job.log", "w+")
    argv = h.command(0, [sys.executable, "-m", "ember", "run", "--hostfile", h.hostfile([1, 1]),
                         os.path.join(PROGRAMS, "nodes.py"), "forever"])
    job = subprocess.Popen(argv, cwd=ROOT, env=h.env(env(EMBER_DISTRIBUTED_TIMEOUT=3)), stdout=log,
                           stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 180
    while "rank 1: step 20" not in (tmp_path / "job.log").read_text():  # mid-training
        assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "job.log").read_text()
        time.sleep(0.05)
    return job


def test_a_host_whose_processes_die_mid_step_ends_the_job_saying_so(hosts, tmp_path):
    h = hosts(2)
    job = _start_forever(h, tmp_path)
    h.kill(1)
    job.wait(timeout=120)
    out = (tmp_path / "job.log").read_text()
    assert job.returncode != 0, out
    assert "ember run: mpiexec lost its connection to another host's process manager" in out, out
    assert "ember run: the job failed" in out, out
    _no_leftovers(h, 2)


@pytest.mark.slow
def test_a_host_that_goes_silent_mid_step_is_named_and_the_job_ends(hosts, tmp_path):
    """A machine that powers off: its processes freeze and its network goes; the survivor names the rank after
    the heartbeat timeout, and ember run stops an mpiexec that cannot reach that host any more."""
    h = hosts(2)
    job = _start_forever(h, tmp_path)
    subprocess.run(["ip", "-n", h.names[1], "link", "set", "eth0", "down"], check=True)
    for pid in h.pids(1):
        os.kill(pid, 19)  # SIGSTOP
    job.wait(timeout=180)
    out = (tmp_path / "job.log").read_text()
    assert job.returncode != 0, out
    assert "on rank 0: rank 1 failed: sent no heartbeat for 3 s" in out, out
    assert "ember run: mpiexec did not end 16 s after the job failed" in out, out
    h.kill(1)
    _no_leftovers(h, 2)
