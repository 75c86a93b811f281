"""Running test programs on several MPI ranks: `ember run` as a subprocess with a timeout, skipped without MPI."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def mpi_missing() -> str | None:
    """Why MPI tests cannot run here (None when they can)."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'ember[distributed]')"
    from ember.distributed.launch import find_mpiexec

    try:
        find_mpiexec()
    except FileNotFoundError as e:
        return str(e)
    return None


requires_mpi = pytest.mark.skipif(mpi_missing() is not None, reason=mpi_missing() or "")


def env(**extra) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p])
    e.pop("EMBER_DISTRIBUTED_DEBUG", None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def ember(*args, timeout: float = 240, **extra) -> subprocess.CompletedProcess:
    """`python -m ember ARGS` in the repository root; its output (stdout and stderr together) as text."""
    return subprocess.run([sys.executable, "-m", "ember", *map(str, args)], cwd=ROOT, env=env(**extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def run(n: int, program: str, *args, servers: int = 0, timeout: float = 240, **extra) -> subprocess.CompletedProcess:
    """`ember run -n N programs/PROGRAM ARGS`."""
    opts = ["--servers", servers] if servers else []
    return ember("run", "-n", n, *opts, os.path.join(PROGRAMS, program), *args, timeout=timeout, **extra)


def check(proc: subprocess.CompletedProcess) -> str:
    """The output of a job that must have succeeded (its output in the assertion message otherwise)."""
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{proc.stdout[-8000:]}"
    return proc.stdout


def free_port() -> int:
    """A TCP port nobody listens on now (for a rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nodes_command(nnodes: int, node: int, port: int, program: str, *args, nproc: int = 1, addr: str = "127.0.0.1",
                  restarts: int = 0) -> list:
    """The `ember run --nnodes` command of one machine (a list for subprocess)."""
    return [sys.executable, "-m", "ember", "run", "--nnodes", str(nnodes), "--node-rank", str(node), "--master-addr",
            addr, "--master-port", str(port), "-n", str(nproc), "--max-restarts", str(restarts),
            os.path.join(PROGRAMS, program), *map(str, args)]
