"""`ember run -n N script.py [args]`: start N ranks of a program with the mpiexec of an installed MPI.

It finds mpiexec (--mpiexec, $EMBER_MPIEXEC, the one beside this Python, which the mpich wheel puts
there, else the PATH), knows the flags of MPICH's Hydra and Open MPI (a hostfile in either spelling,
running as root, more ranks than cores), and starts every rank under a small supervisor
(_supervise.py) that names a rank killed by a signal. `--servers S` makes the last S ranks parameter
servers (ember.distributed.ps) or TF1 `ps` tasks (ember.v1). Across machines without a shared
launcher, `--nnodes K --node-rank I --master-addr A --master-port P` on each machine joins the
machines' ranks into one world (torchrun's flags; rendezvous.py). `--max-restarts R` starts a failed
job again, up to R times (elastic.py); an mpiexec that outlives a reported failure is stopped
(jobwatch.py). It returns the job's exit status, so a failed rank fails the command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from ember.distributed import elastic, hostfile
from ember.distributed._env import INSTALL
from ember.distributed.faults import DEFAULT_TIMEOUT

DEFAULT_MASTER_PORT = 29500  # torchrun's
# Variables the ranks read, which Open MPI passes on only when told to (-x).
_PASSED = ("EMBER_NUM_SERVERS", "EMBER_DISTRIBUTED_TIMEOUT", "EMBER_DISTRIBUTED_DEBUG", "PYTHONPATH", "EMBER_NNODES",
           "EMBER_NODE_RANK", "MASTER_ADDR", "MASTER_PORT", *elastic.RESTART_VARS)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() else default


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `ember run` (used by ember.cli)."""
    p.add_argument("-n", "--nproc", "-np", "--nproc-per-node", "--nproc_per_node", type=int, default=None,
                   dest="nproc", help="number of ranks (per machine with --nnodes; default: the hostfile's slots, "
                   "else 1)")
    p.add_argument("--hostfile", "-f", default=None,
                   help="an MPI hostfile: one host per line, as 'host', 'host:SLOTS' or 'host slots=SLOTS'")
    p.add_argument("--servers", type=int, default=0,
                   help="how many of the ranks (the last ones) are parameter servers / TF1 ps tasks")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a rank may stay silent, or a collective wait, before the job fails naming the "
                   "ranks (default: 20 s of silence, 30 min in a collective)")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0, dest="max_restarts",
                   help="start the job again when a rank fails, up to this many times (the program resumes from "
                   "its last checkpoint)")
    p.add_argument("--nnodes", type=int, default=_env_int("NNODES", 1),
                   help="machines that each run `ember run` with the same flags and their own --node-rank "
                   "(default $NNODES, else 1)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=_env_int("NODE_RANK", 0), dest="node_rank",
                   help="this machine's index, 0 to nnodes-1 (default $NODE_RANK, else 0)")
    p.add_argument("--master-addr", "--master_addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   dest="master_addr", help="address of node 0, where the machines meet (default $MASTER_ADDR)")
    p.add_argument("--master-port", "--master_port", type=int, default=_env_int("MASTER_PORT", DEFAULT_MASTER_PORT),
                   dest="master_port", help=f"TCP port on node 0 (default $MASTER_PORT, else {DEFAULT_MASTER_PORT})")
    p.add_argument("--mpiexec", default=None, help="the mpiexec to use (default: $EMBER_MPIEXEC, the one beside "
                   "this Python, else the PATH)")
    p.add_argument("-m", dest="module", default=None, help="run a module (like python -m)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="script.py [args] (or any command)")


def find_mpiexec(explicit: str | None = None) -> str:
    """The mpiexec to run; a clear error saying how to get one."""
    for cand in (explicit, os.environ.get("EMBER_MPIEXEC")):
        if cand:
            path = shutil.which(cand)
            if path is None:
                raise FileNotFoundError(f"ember run: mpiexec {cand!r} was not found")
            return path
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    for name in ("mpiexec", "mpirun"):
        path = shutil.which(name)
        if path is not None:
            return path
    raise FileNotFoundError(f"ember run: no mpiexec found; {INSTALL}, or put your MPI's mpiexec on the PATH")


def flavor(mpiexec: str) -> str:
    """'openmpi', 'hydra' (MPICH, Intel MPI, MVAPICH) or 'unknown', from `mpiexec --version`."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout + out.stderr).lower()
    if "open mpi" in text or "openrte" in text or "prrte" in text:
        return "openmpi"
    if "hydra" in text or "mpich" in text or "intel" in text:
        return "hydra"
    return "unknown"


def _check(args) -> int:
    """The number of ranks this mpiexec starts; a ValueError for inconsistent options."""
    if not args.program and not args.module:
        raise ValueError("ember run: give a script (ember run -n 2 train.py) or a module (-m package.module)")
    if args.hostfile is not None and not os.path.isfile(args.hostfile):
        raise FileNotFoundError(f"ember run: hostfile {args.hostfile!r} does not exist")
    n = args.nproc
    if n is None:
        n = sum(slots for _, slots in hostfile.parse(args.hostfile)) if args.hostfile else 1
    if n < 1:
        raise ValueError(f"ember run: -n must be at least 1, got {n}")
    if args.max_restarts < 0:
        raise ValueError(f"ember run: --max-restarts must be 0 or more, got {args.max_restarts}")
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"ember run: --node-rank must be 0 to --nnodes - 1 with --nnodes at least 1, got node rank "
                         f"{args.node_rank} of {args.nnodes}")
    if args.nnodes > 1 and args.hostfile:
        raise ValueError("ember run: give --hostfile (one mpiexec starts every machine's ranks) or --nnodes (one "
                         "`ember run` per machine), not both")
    if not 0 < args.master_port < 65536:
        raise ValueError(f"ember run: --master-port must be a TCP port (1 to 65535), got {args.master_port}")
    if not 0 <= args.servers < n * args.nnodes:
        raise ValueError(f"ember run: --servers must leave at least one worker (0 <= servers < {n * args.nnodes}), "
                         f"got {args.servers}")
    return n


def build_command(args, mpiexec: str, kind: str, hostfile_path: str | None = None) -> tuple:
    """(argv, environment) of the mpiexec call for the parsed `ember run` arguments.

    `hostfile_path` is the hostfile in `kind`'s spelling (hostfile.translated); default: --hostfile as given.
    """
    n = _check(args)
    hostfile_path = hostfile_path or args.hostfile
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if args.module:
        rank_cmd = [sys.executable, "-m", args.module] + command
    elif command and (command[0].endswith(".py") or os.path.isfile(command[0])):
        rank_cmd = [sys.executable] + command
    else:
        rank_cmd = command
    env = dict(os.environ)
    env["EMBER_NUM_SERVERS"] = str(args.servers)
    if args.timeout is not None:
        env["EMBER_DISTRIBUTED_TIMEOUT"] = str(args.timeout)
    if args.nnodes > 1:
        env.update(EMBER_NNODES=str(args.nnodes), EMBER_NODE_RANK=str(args.node_rank), MASTER_ADDR=args.master_addr,
                   MASTER_PORT=str(args.master_port))
    else:
        env.pop("EMBER_NNODES", None)
    # The ranks import the same ember as this command (a source checkout not installed, too).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    argv = [mpiexec, "-n", str(n)]
    if kind == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if hostfile_path:
            argv += ["--hostfile", hostfile_path]
        else:
            argv.append("--oversubscribe")  # more ranks than cores on one machine is fine for Ember
        for var in _PASSED:
            if var in env or var in elastic.RESTART_VARS:
                argv += ["-x", var]
    elif hostfile_path:
        argv += ["-f", hostfile_path]
    supervisor = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervise.py")
    return argv + [sys.executable, "-I", supervisor] + rank_cmd, env


def run_main(args) -> int:
    """`ember run`: launch the ranks (again after a failure, up to --max-restarts times); the job's exit status."""
    mpiexec = find_mpiexec(args.mpiexec)
    kind = flavor(mpiexec)
    _check(args)
    with hostfile.translated(args.hostfile, kind) as path:
        argv, env = build_command(args, mpiexec, kind, path)
        # after a rank reports a failure, the others may take a heartbeat timeout to follow; then mpiexec should end
        silence = args.timeout or float(env.get("EMBER_DISTRIBUTED_TIMEOUT") or DEFAULT_TIMEOUT)
        return elastic.run(argv, env, args.max_restarts, grace=2 * silence + 10)
