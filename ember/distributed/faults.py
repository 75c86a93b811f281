"""Failure detection: a rank that raises, is killed or is stuck must not leave the others waiting forever.

Each MPI process runs a watchdog thread on a communicator of its own. It sends a heartbeat to every
other rank each `timeout / 10` seconds and reads theirs; a rank silent for `timeout` seconds is
declared dead (killed, crashed or frozen). Each heartbeat also says how many collectives the rank has
called on each of its groups, so a collective that waits longer than `collective_timeout` (a rank
stuck in Python keeps beating) fails naming the ranks that have not called it, and tells them. A
rank whose main thread raises announces the error to the others (the excepthook installed by
init_process_group) before it stops. Every wait of a collective (work.py) asks `check()`, so the
survivors raise `DistBackendError` naming the failed rank at once; a survivor whose main thread is
not waiting on MPI is stopped by its watchdog after `REPORT_DELAY`. A rank that leaves normally
(destroy_process_group, or the end of the program) says goodbye first.
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

HEARTBEAT, NOTICE, BYE, ACK, TIMEOUT = 1, 2, 3, 4, 5
DEFAULT_TIMEOUT = 20.0  # seconds a peer may stay silent before it is declared dead
DEFAULT_COLLECTIVE_TIMEOUT = 1800.0  # seconds a collective may wait when no timeout is given (PyTorch's 30 min)
REPORT_DELAY = 1.0  # seconds a survivor's main thread has to raise the error itself before the watchdog stops it
ANNOUNCE_WAIT = 3.0  # seconds a failing rank waits for the others to report its failure before it exits
LEFT_GRACE = 2.0  # seconds an operation may still complete after a rank it waits on has left
_PROBES = 4  # empty probes in a row that end a drain of the watchdog's messages


def _prefix(rank: int) -> str:
    return f"[rank {rank}] ember.distributed:"


class Watchdog:
    """Heartbeats, failure notices and goodbyes between the ranks of one MPI job."""

    def __init__(self, comm, MPI, timeout: float, collective_timeout: float | None = None,  # noqa: N803
                 progress=None) -> None:
        self.comm = comm
        self.MPI = MPI
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = float(timeout)
        self.collective_timeout = float(collective_timeout or DEFAULT_COLLECTIVE_TIMEOUT)
        self.interval = min(1.0, self.timeout / 10)
        self._progress = progress or (lambda: [])  # [(group uid, collectives called)] of this rank
        now = time.monotonic()
        self.last = [now] * self.size
        self.calls: list = [{} for _ in range(self.size)]  # each peer's {group uid: collectives called}
        self.left: dict = {}  # rank -> when it said goodbye
        # The first failure seen: (rank, reason, when, whole, told_by): `whole` when the reason is a full sentence,
        # `told_by` the rank whose notice named this rank as the failed one (it waits for an ACK).
        self.failure: tuple | None = None
        self.seen_by_main = False  # the main thread raised the failure (so the watchdog need not stop it)
        self.acks: set = set()
        # (what, members, since, (group, seq) or None) while the main thread blocks inside MPI
        self.blocked: tuple | None = None
        self._sending: list = []  # (request, buffer) of sends in flight: the bytes must outlive the send
        self._lock = threading.Lock()  # the main thread sends too (announce, goodbye, ACK)
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
                self._sent()
        except Exception as e:  # noqa: BLE001 - a broken watchdog must say so, never die silently
            print(f"{_prefix(self.rank)} the watchdog stopped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _send(self, dest: int, tag: int, payload: np.ndarray | None = None) -> None:
        buf = np.zeros(1, np.uint8) if payload is None else payload
        with self._lock:
            self._sending.append((self.comm.Isend([buf, self.MPI.BYTE], dest, tag), buf))

    def _sent(self) -> bool:
        """Whether every send has completed (the completed ones are forgotten)."""
        with self._lock:
            self._sending = [(req, buf) for req, buf in self._sending if not req.Test()]
            return not self._sending

    def _beat(self) -> None:
        calls = np.array([v for pair in self._progress() for v in pair], np.int64).view(np.uint8)
        for p in range(self.size):
            if p != self.rank and p not in self.left:
                self._send(p, HEARTBEAT, calls)

    def _drain(self) -> None:
        MPI = self.MPI
        status = MPI.Status()
        misses = 0
        # One Iprobe may find nothing while more messages wait to be progressed (MPICH moves about one per
        # call): keep asking a few times, or with several peers the backlog, and a notice in it, would grow.
        while misses < _PROBES:
            if not self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
                misses += 1
                continue
            misses = 0
            src, tag = status.Get_source(), status.Get_tag()
            buf = bytearray(status.Get_count(MPI.BYTE))
            self.comm.Recv([buf, MPI.BYTE], src, tag)
            self.last[src] = time.monotonic()
            if tag == HEARTBEAT and len(buf) % 16 == 0:
                pairs = np.frombuffer(bytes(buf), np.int64).reshape(-1, 2)
                self.calls[src] = {int(uid): int(seq) for uid, seq in pairs}
            elif tag == NOTICE:
                self._fail(src, buf.decode(errors="replace"))
            elif tag == TIMEOUT:
                culprit, _, text = buf.decode(errors="replace").partition("\n")
                self._fail(int(culprit) if culprit.isdigit() else src, text, whole=True, told_by=src)
            elif tag == BYE:
                self.left.setdefault(src, time.monotonic())
            elif tag == ACK:
                self.acks.add(src)

    def _check_silence(self) -> None:
        now = time.monotonic()
        for p in range(self.size):
            if p != self.rank and p not in self.left and now - self.last[p] > self.timeout:
                self._fail(p, f"sent no heartbeat for {self.timeout:g} s (killed, crashed or frozen)")

    def _fail(self, rank: int, reason: str, whole: bool = False, told_by: int | None = None) -> None:
        if self.failure is None:
            self.failure = (rank, reason, time.monotonic(), whole, told_by)

    def _stop_if_unreported(self) -> None:
        """The main thread did not raise the failure itself (it is not waiting on MPI): stop the process."""
        f = self.failure
        if f is None or self.seen_by_main or time.monotonic() - f[2] < REPORT_DELAY:
            return
        self._report_and_exit(f"{_prefix(self.rank)} stopping: {f[1] if f[3] else f'rank {f[0]} failed: {f[1]}'}",
                              f[0])

    def _report_and_exit(self, line: str, failed_rank: int | None) -> None:
        """Print why this rank stops, tell the rank that waits for this report (ACK), and exit.

        After a timeout's notice the rank that timed out ends the job once every rank has reported (its exit
        makes mpiexec stop the rest), so this rank lingers rather than cut the others' reports short.
        """
        print(line, file=sys.stderr, flush=True)
        told_by = self.failure[4] if self.failure is not None else None
        reported_to = told_by if told_by is not None else failed_rank
        if reported_to is not None and reported_to != self.rank:
            self._send(reported_to, ACK)
        time.sleep(ANNOUNCE_WAIT if told_by is not None else 0.05)
        _flush_and_exit(1)

    def _stop_if_blocked(self) -> None:
        """The main thread is blocked inside MPI on an operation a failed (or departed) rank will never join, or
        on a collective past its timeout: it cannot raise, so report the error it would raise, in its words, tell
        the ranks concerned, and stop the process."""
        blocked = self.blocked
        if blocked is None:
            return
        what, members, since, where = blocked
        try:
            self.check(what, members, since)
            # One heartbeat interval more: the others' reports are up to an interval old, and a rank that is
            # silent too (frozen) is then named by the silence check, the more precise diagnosis.
            if where is not None and time.monotonic() - since > self.collective_timeout + self.interval:
                self._time_out(what, members, since, where)
        except DistBackendError as e:
            self._report_and_exit(f"DistBackendError: {e}", e.failed_rank)

    def _time_out(self, what: str, members, since: float, where: tuple) -> None:
        """A collective waited longer than collective_timeout: name the ranks that have not called it, tell every
        rank (each stops, saying so), and end the job once they have reported."""
        group, seq = where
        late = sorted(r for r in (members or range(self.size))
                      if r != self.rank and self.calls[r].get(group.uid, 0) < seq)
        waited = time.monotonic() - since
        head = (f"{what} (collective #{seq} on group {group.name}) timed out: rank {self.rank} waited {waited:.1f} s "
                f"(timeout {self.collective_timeout:g} s)")
        if late:
            at = ", ".join(f"rank {r} is at #{self.calls[r].get(group.uid, 0)}" for r in late)
            reason = f"{head}, and rank(s) {', '.join(map(str, late))} did not call it ({at})"
        else:
            reason = (f"{head}; every rank of the group called it, but it did not complete (mismatched collectives? "
                      "set EMBER_DISTRIBUTED_DEBUG=DETAIL)")
        culprit = late[0] if late else self.rank
        payload = np.frombuffer(f"{culprit}\n{reason}".encode()[:4000], np.uint8).copy()
        peers = [p for p in range(self.size) if p != self.rank and p not in self.left]
        for p in peers:
            self._send(p, TIMEOUT, payload)
        self._fail(culprit, reason, whole=True)
        print(f"DistBackendError: {what} on rank {self.rank}: {reason}", file=sys.stderr, flush=True)
        deadline = time.monotonic() + ANNOUNCE_WAIT + 2 * REPORT_DELAY
        while time.monotonic() < deadline and not set(peers) <= self.acks:
            self._drain()
            time.sleep(0.01)
        _flush_and_exit(1)

    # --- what the main thread asks ------------------------------------------------------------------
    def check(self, what: str, members=None, since: float | None = None) -> None:
        """Raise DistBackendError naming the failed rank when one failed (or, among `members`, left)."""
        f = self.failure
        if f is not None:
            self.seen_by_main = True
            text = f[1] if f[3] else f"rank {f[0]} failed: {f[1]}"
            raise DistBackendError(f"{what} on rank {self.rank}: {text}", failed_rank=f[0])
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
        # Read what the peers sent until they have said goodbye too (bounded): a message left unread at
        # MPI_Finalize makes the network layer warn (UCX: "unexpected tag-receive descriptor").
        deadline = time.monotonic() + 2 * self.interval
        while time.monotonic() < deadline and (len(self.left) < self.size - 1 or not self._sent()):
            self._drain()
            time.sleep(0.005)
        with self._lock:  # sends still in flight finish on their own; their bytes stay alive until the exit
            for req, buf in self._sending:
                if not req.Test():
                    req.Free()
                    _UNFINISHED.append(buf)
            self._sending = []


_UNFINISHED: list = []  # buffers of sends freed before they completed (a departing watchdog's)


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
