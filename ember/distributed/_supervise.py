"""One rank under `ember run`: runs the rank's command as a child and says which rank died if it is killed.

The launcher's mpiexec starts this file (by path, so no package is imported) once per rank. A rank
killed by a signal cannot report itself; this supervisor prints its rank, pid and the signal, and
exits non-zero so that mpiexec stops the job. The child dies with its supervisor (PR_SET_PDEATHSIG on
Linux), and SIGINT/SIGTERM sent to the supervisor are passed on to it, followed by SIGCONT so that a
stopped (frozen) child acts on them.
"""

import os
import signal
import socket
import subprocess
import sys

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK")


def _rank() -> str:
    for var in _RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return os.environ[var]
    return "?"


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
    child = subprocess.Popen(argv, close_fds=False, preexec_fn=preexec)  # noqa: PLW1509 - PMI's fd must pass on

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
