"""`ember run -n N script.py [args]`: start N ranks of a program with the mpiexec of an installed MPI.

It finds mpiexec (--mpiexec, $EMBER_MPIEXEC, the one beside this Python, which the mpich wheel puts
there, else the PATH), knows the flags of MPICH's Hydra and Open MPI (a hostfile, running as root,
more ranks than cores), and starts every rank under a small supervisor (_supervise.py) that names a
rank killed by a signal. `--servers S` makes the last S ranks parameter servers (ember.distributed.ps)
or TF1 `ps` tasks (ember.v1). It returns mpiexec's exit status, so a failed rank fails the command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from ember.distributed._env import INSTALL


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `ember run` (used by ember.cli)."""
    p.add_argument("-n", "--nproc", "-np", type=int, default=None, dest="nproc",
                   help="number of ranks (default: the hostfile's slots, else 1)")
    p.add_argument("--hostfile", "-f", default=None, help="an MPI hostfile: one host per line, optionally with slots")
    p.add_argument("--servers", type=int, default=0,
                   help="how many of the ranks (the last ones) are parameter servers / TF1 ps tasks")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a rank may stay silent before the others fail naming it (default 20)")
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


def _hostfile_slots(path: str) -> int:
    total = 0
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            slots = 1
            for part in line.replace(":", " slots=").split()[1:]:
                if part.startswith("slots=") and part[6:].isdigit():
                    slots = int(part[6:])
            total += slots
    return total


def build_command(args, mpiexec: str, kind: str) -> tuple:
    """(argv, environment) of the mpiexec call for the parsed `ember run` arguments."""
    if not args.program and not args.module:
        raise ValueError("ember run: give a script (ember run -n 2 train.py) or a module (-m package.module)")
    n = args.nproc
    if args.hostfile is not None and not os.path.isfile(args.hostfile):
        raise FileNotFoundError(f"ember run: hostfile {args.hostfile!r} does not exist")
    if n is None:
        n = _hostfile_slots(args.hostfile) if args.hostfile else 1
    if n < 1:
        raise ValueError(f"ember run: -n must be at least 1, got {n}")
    if not 0 <= args.servers < n:
        raise ValueError(f"ember run: --servers must leave at least one worker (0 <= servers < {n}), got {args.servers}")
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
    # The ranks import the same ember as this command (a source checkout not installed, too).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    argv = [mpiexec, "-n", str(n)]
    if kind == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if args.hostfile:
            argv += ["--hostfile", args.hostfile]
        else:
            argv.append("--oversubscribe")  # more ranks than cores on one machine is fine for Ember
        for var in ("EMBER_NUM_SERVERS", "EMBER_DISTRIBUTED_TIMEOUT", "EMBER_DISTRIBUTED_DEBUG", "PYTHONPATH"):
            if var in env:
                argv += ["-x", var]
    elif args.hostfile:
        argv += ["-f", args.hostfile]
    supervisor = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervise.py")
    return argv + [sys.executable, "-I", supervisor] + rank_cmd, env


def run_main(args) -> int:
    """`ember run`: launch the ranks and return the job's exit status (non-zero when a rank failed)."""
    mpiexec = find_mpiexec(args.mpiexec)
    argv, env = build_command(args, mpiexec, flavor(mpiexec))
    try:
        code = subprocess.call(argv, env=env)
    except KeyboardInterrupt:
        return 130
    if code != 0:
        print(f"ember run: the job failed (mpiexec exited with status {code})", file=sys.stderr, flush=True)
        return code if 0 < code < 256 else 1
    return 0
