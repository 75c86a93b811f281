"""One run of mpiexec, watched: its error output is passed on, and a job that failed cannot hang the command.

When a host is lost, mpiexec may never return: after the surviving ranks have stopped (naming the lost
rank), it keeps trying to reach the dead host's process manager. So `ember run` reads mpiexec's error
output as it passes it on; once a rank has reported a failure (or Hydra an error of its own), mpiexec
gets `grace` seconds to end before it and what it started here are stopped. Hydra's terse report of a
lost host is explained in one line. mpiexec is told to stop if `ember run` itself is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

# Lines in a job's error output that mean it failed: a rank's report (faults.py, the supervisor) or Hydra's.
_FAILED = ("DistBackendError", "ember.distributed:", "ember run: rank", "[mpiexec@", "[proxy:")
_LOST_HOST = "assert (!closed) failed"  # Hydra: a proxy's connection closed (its host's processes are gone)


def _stop_with_parent() -> None:
    """In mpiexec: get SIGTERM when `ember run` dies (Linux), so a killed command leaves no job behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_job(argv: list, env: dict, grace: float) -> int:
    """mpiexec's exit status (non-zero, and mpiexec stopped, if it outlives a reported failure by `grace` s)."""
    preexec = _stop_with_parent if sys.platform.startswith("linux") else None
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, preexec_fn=preexec)  # noqa: PLW1509
    seen = {"failed": None, "lost": False}
    reader = threading.Thread(target=_pass_on, args=(proc.stderr, seen), daemon=True)
    reader.start()
    try:
        while True:
            try:
                code = proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                pass
            if seen["failed"] is not None and time.monotonic() - seen["failed"] > grace:
                _say(f"mpiexec did not end {grace:g} s after the job failed (a host it cannot reach?); stopping it")
                code = _stop(proc)
                break
    except KeyboardInterrupt:
        _stop(proc)
        raise
    reader.join(timeout=5)
    if seen["lost"]:
        _say("mpiexec lost its connection to another host's process manager: that machine went down, or its "
             "processes were killed")
    return code


def _pass_on(stream, seen: dict) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        out = getattr(sys.stderr, "buffer", None)
        out.write(raw) if out is not None else sys.stderr.write(line)
        sys.stderr.flush()
        if seen["failed"] is None and any(marker in line for marker in _FAILED):
            seen["failed"] = time.monotonic()
        if _LOST_HOST in line:
            seen["lost"] = True
    stream.close()


def _stop(proc) -> int:
    """Stop mpiexec and the processes it started on this machine; its exit status (1 if it gave none)."""
    family = _descendants(proc.pid)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    for pid in family:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    code = proc.poll()
    return code if code not in (None, 0) else 1


def _descendants(pid: int) -> list:
    """The processes below `pid` (Linux /proc; elsewhere none are known)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        found += children
        todo += children
    return found


def _say(text: str) -> None:
    print(f"ember run: {text}", file=sys.stderr, flush=True)
