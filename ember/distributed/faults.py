"""Failure detection: a rank that raises or is killed must not leave the others waiting forever.

Each MPI process runs a watchdog thread on a communicator of its own. It sends a heartbeat to every
other rank each `timeout / 10` seconds and reads theirs; a rank silent for `timeout` seconds is
declared dead (killed, crashed or frozen). A rank whose main thread raises announces the error to the
others (the excepthook installed by init_process_group) before it stops. Every wait of a collective
(work.py) asks `check()`, so the survivors raise `DistBackendError` naming the failed rank at once;
a survivor whose main thread is not waiting on MPI is stopped by its watchdog after `REPORT_DELAY`.
A rank that leaves normally (destroy_process_group, or the end of the program) says goodbye first.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
import traceback

import numpy as np

from ember.distributed.errors import DistBackendError

HEARTBEAT, NOTICE, BYE, ACK = 1, 2, 3, 4
DEFAULT_TIMEOUT = 20.0  # seconds a peer may stay silent before it is declared dead
REPORT_DELAY = 1.0  # seconds a survivor's main thread has to raise the error itself before the watchdog stops it
ANNOUNCE_WAIT = 3.0  # seconds a failing rank waits for the others to report its failure before it exits
LEFT_GRACE = 2.0  # seconds an operation may still complete after a rank it waits on has left
_BEAT = np.zeros(1, np.int8)  # never written: heartbeats are sent from it and their requests freed at once


def _prefix(rank: int) -> str:
    return f"[rank {rank}] ember.distributed:"


class Watchdog:
    """Heartbeats, failure notices and goodbyes between the ranks of one MPI job."""

    def __init__(self, comm, MPI, timeout: float) -> None:  # noqa: N803
        self.comm = comm
        self.MPI = MPI
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = float(timeout)
        self.interval = min(1.0, self.timeout / 10)
        now = time.monotonic()
        self.last = [now] * self.size
        self.left: dict = {}  # rank -> when it said goodbye
        self.failure: tuple | None = None  # (rank, reason, when) of the first failure seen
        self.seen_by_main = False  # the main thread raised the failure (so the watchdog need not stop it)
        self.acks: set = set()
        self.blocked: tuple | None = None  # (what, members, since) while the main thread blocks inside MPI
        self._payloads: list = []  # notices being sent (their requests are freed, so keep the bytes alive)
        self.pid = os.getpid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ember-distributed-watchdog", daemon=True)
        self._thread.start()

    # --- the thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self._beat()
                self._drain()
                self._check_silence()
                self._stop_if_blocked()
                self._stop_if_unreported()
        except Exception as e:  # noqa: BLE001 - a broken watchdog must say so, never die silently
            print(f"{_prefix(self.rank)} the watchdog stopped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _send(self, dest: int, tag: int, payload=None) -> None:
        buf = _BEAT if payload is None else payload
        if payload is not None:
            self._payloads.append(payload)
        req = self.comm.Isend([buf, self.MPI.BYTE if payload is not None else self.MPI.INT8_T], dest, tag)
        req.Free()  # the send completes on its own; the buffer outlives it

    def _beat(self) -> None:
        for p in range(self.size):
            if p != self.rank and p not in self.left:
                self._send(p, HEARTBEAT)

    def _drain(self) -> None:
        MPI = self.MPI
        status = MPI.Status()
        while self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
            src, tag = status.Get_source(), status.Get_tag()
            buf = bytearray(status.Get_count(MPI.BYTE))
            self.comm.Recv([buf, MPI.BYTE], src, tag)
            self.last[src] = time.monotonic()
            if tag == NOTICE:
                self._fail(src, buf.decode(errors="replace"))
            elif tag == BYE:
                self.left.setdefault(src, time.monotonic())
            elif tag == ACK:
                self.acks.add(src)

    def _check_silence(self) -> None:
        now = time.monotonic()
        for p in range(self.size):
            if p != self.rank and p not in self.left and now - self.last[p] > self.timeout:
                self._fail(p, f"sent no heartbeat for {self.timeout:g} s (killed, crashed or frozen)")

    def _fail(self, rank: int, reason: str) -> None:
        if self.failure is None:
            self.failure = (rank, reason, time.monotonic())

    def _stop_if_unreported(self) -> None:
        """The main thread did not raise the failure itself (it is not waiting on MPI): stop the process."""
        f = self.failure
        if f is None or self.seen_by_main or time.monotonic() - f[2] < REPORT_DELAY:
            return
        print(f"{_prefix(self.rank)} stopping: rank {f[0]} failed: {f[1]}", file=sys.stderr, flush=True)
        self._send(f[0], ACK)
        _flush_and_exit(1)

    def _stop_if_blocked(self) -> None:
        """The main thread is blocked inside MPI on an operation a failed (or departed) rank will never join:
        it cannot raise, so report the error it would raise, in its words, and stop the process."""
        blocked = self.blocked
        if blocked is None:
            return
        what, members, since = blocked
        try:
            self.check(what, members, since)
        except DistBackendError as e:
            print(f"DistBackendError: {e}", file=sys.stderr, flush=True)
            if e.failed_rank is not None:
                self._send(e.failed_rank, ACK)
                time.sleep(0.05)
            _flush_and_exit(1)

    # --- what the main thread asks ------------------------------------------------------------------
    def check(self, what: str, members=None, since: float | None = None) -> None:
        """Raise DistBackendError naming the failed rank when one failed (or, among `members`, left)."""
        f = self.failure
        if f is not None:
            self.seen_by_main = True
            raise DistBackendError(f"{what} on rank {self.rank}: rank {f[0]} failed: {f[1]}", failed_rank=f[0])
        if self.left and since is not None:
            now = time.monotonic()
            for r, when in self.left.items():
                if (members is None or r in members) and now - max(when, since) > LEFT_GRACE:
                    raise DistBackendError(
                        f"{what} on rank {self.rank}: rank {r} left the job (it exited or called "
                        "destroy_process_group) before this operation completed", failed_rank=r)

    def announce(self, text: str) -> None:
        """This rank failed: tell every live peer, then wait (bounded) until they have reported it."""
        payload = np.frombuffer(text.encode()[:4000], np.uint8).copy()
        peers = [p for p in range(self.size) if p != self.rank and p not in self.left]
        for p in peers:
            self._send(p, NOTICE, payload)
        deadline = time.monotonic() + ANNOUNCE_WAIT
        while time.monotonic() < deadline and not set(peers) <= self.acks and self.failure is None:
            time.sleep(0.01)

    def close(self) -> None:
        """Say goodbye to the peers and stop the thread (a normal exit or destroy_process_group)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        for p in range(self.size):
            if p != self.rank and p not in self.left:
                self._send(p, BYE)


def _flush_and_exit(code: int) -> None:
    """Leave now, without MPI_Finalize (which could wait forever on a dead peer)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


# --- the process-wide hooks ---------------------------------------------------------------------------
_active: list = []  # the running Watchdog (at most one)
_installed = [False]


def install(watchdog: Watchdog) -> None:
    """Make `watchdog` the process's one: uncaught errors are announced, exits say goodbye."""
    _active[:] = [watchdog]
    if not _installed[0]:
        _installed[0] = True
        previous = sys.excepthook

        def excepthook(exc_type, exc, tb):
            previous(exc_type, exc, tb)
            _on_uncaught(exc_type, exc)

        sys.excepthook = excepthook
        atexit.register(_at_exit)


def current() -> Watchdog | None:
    """The running watchdog, if any."""
    return _active[0] if _active else None


def uninstall() -> None:
    """Close the running watchdog (goodbye to the peers); the hooks stay and do nothing without one."""
    wd = current()
    _active.clear()
    if wd is not None and wd.pid == os.getpid():
        wd.close()


def _on_uncaught(exc_type, exc) -> None:
    wd = current()
    if wd is None or wd.pid != os.getpid():
        return
    if isinstance(exc, DistBackendError) and exc.failed_rank is not None:
        wd._send(exc.failed_rank, ACK)  # the failure was reported here: the failed rank may go
        time.sleep(0.05)
    else:
        where = f"{socket.gethostname()}, pid {os.getpid()}"
        text = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        print(f"{_prefix(wd.rank)} rank {wd.rank} ({where}) failed: {text}; stopping the job",
              file=sys.stderr, flush=True)
        wd.announce(f"{text} (on {where})")
    _flush_and_exit(1)


def _at_exit() -> None:
    uninstall()
