"""One rank under `ember run`: runs the rank's command as a child and says which rank died if it is killed.

The launcher's mpiexec starts this file (by path, so no package is imported) once per rank. A rank
killed by a signal cannot report itself; this supervisor prints its rank, pid and the signal, and
exits non-zero so that mpiexec stops the job. The child dies with its supervisor (PR_SET_PDEATHSIG on
Linux), and SIGINT/SIGTERM sent to the supervisor are passed on to it, followed by SIGCONT so that a
stopped (frozen) child acts on them. The child gets torchrun's variables (RANK, WORLD_SIZE,
LOCAL_RANK, ...), counted across machines under `ember run --nnodes`.
"""

import os
import signal
import socket
import subprocess
import sys

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK")


_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "MV2_COMM_WORLD_SIZE")


def _first(names) -> int | None:
    for var in names:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def _rank() -> str:
    """This rank's global rank (node rank * ranks per node + local rank under `ember run --nnodes`)."""
    local = _first(_RANK_VARS)
    if local is None:
        return "?"
    size = _first(_SIZE_VARS) or 1
    node = int(os.environ.get("EMBER_NODE_RANK", "0") or 0) if os.environ.get("EMBER_NNODES") else 0
    return str(node * size + local)


def _torchrun_variables() -> dict:
    """torchrun's variables for the rank (RANK, WORLD_SIZE, LOCAL_RANK, ...): scripts written for it read them."""
    local, size = _first(_RANK_VARS), _first(_SIZE_VARS)
    if local is None or size is None:
        return {}
    nodes = int(os.environ.get("EMBER_NNODES", "1") or 1)
    node = int(os.environ.get("EMBER_NODE_RANK", "0") or 0) if nodes > 1 else 0
    return {"RANK": str(node * size + local), "WORLD_SIZE": str(nodes * size), "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(size), "GROUP_RANK": str(node), "NODE_RANK": str(node)}


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the supervisor dies (Linux), so no rank outlives its job."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list) -> int:
    if not argv:
        print("usage: _supervise.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    env = {**os.environ, **_torchrun_variables()}
    child = subprocess.Popen(argv, close_fds=False, preexec_fn=preexec, env=env)  # noqa: PLW1509 - PMI's fd must pass on

    def forward(signum, frame):
        try:
            child.send_signal(signum)
            # a stopped child (SIGSTOP, Ctrl-Z: a frozen rank) acts on the signal only once continued;
            # otherwise this supervisor would wait on it until mpiexec escalated to SIGKILL, if ever
            child.send_signal(signal.SIGCONT)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, forward)
    code = child.wait()
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        print(f"ember run: rank {_rank()} (pid {child.pid} on {socket.gethostname()}) was killed by signal {-code} "
              f"({name})", file=sys.stderr, flush=True)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
