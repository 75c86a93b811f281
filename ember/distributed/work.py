"""`Work`: the handle of a collective started with async_op=True (wait, is_completed), and the wait loop.

A wait is MPI's own blocking `Waitall`; the watchdog thread (faults.py) watches the peers meanwhile,
so a failed peer turns into a `DistBackendError` naming it instead of a hang: raised here when it was
known before the wait, reported by the watchdog (which then stops the process) when it happens during it.
"""

from __future__ import annotations

import time

from ember.distributed import faults
from ember.distributed.errors import DistBackendError


def wait_requests(transport, reqs, what: str, members=None, where=None) -> None:
    """Block until every request in `reqs` is complete; a peer's failure raises DistBackendError.

    The wait itself is MPI's (`Waitall`, in C, with the GIL released): it makes progress at full speed
    and leaves the CPU to the other threads. `where`, (group, collective number), puts a collective's
    wait under the collective timeout.
    """
    if transport.test_all(reqs):
        return
    blocking_call(transport, lambda: transport.wait_all(reqs), what, members, where)


def blocking_call(transport, call, what: str, members=None, where=None) -> None:
    """Run `call`, a blocking MPI call, under the watchdog's eye.

    The watchdog thread knows what the main thread waits for; if a peer it needs fails or leaves
    meanwhile, or a collective (`where` = (group, collective number)) waits past the collective
    timeout, the watchdog reports the error this call would raise and stops the process, since MPI
    cannot abandon a started operation. A failure known before the call is raised here, catchable.
    """
    wd = faults.current()
    since = time.monotonic()
    try:
        if wd is None:
            call()
            return
        wd.check(what, members, since)
        wd.blocked = (what, members, since, where)
        try:
            call()
        finally:
            wd.blocked = None
    except DistBackendError:
        raise
    except Exception as e:  # MPI's own errors (message truncated, ...): name the op and the rank
        raise DistBackendError(f"{what} on rank {_rank(transport)}: the MPI engine failed: {e}") from e


def _rank(transport) -> int:
    return getattr(transport, "rank", 0)


class Work:
    """A started collective: `wait()` blocks until it is done, `is_completed()` asks without blocking.

    `finish` runs once, after completion, in the thread that saw it complete (it divides by the
    world size for AVG, copies staged data back to the device, marks tensors as written).
    """

    def __init__(self, what: str, transport, reqs, finish=None, result=None, members=None, where=None) -> None:
        self.what = what
        self._transport = transport
        self._reqs = list(reqs)
        self._finish = finish
        self._result = result
        self._members = members
        self._where = where  # (group, collective number) of a collective
        self._done = False
        self._error: BaseException | None = None

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()

    def is_completed(self) -> bool:
        """Whether the operation has finished (this also lets MPI make progress on it)."""
        if self._done:
            return True
        try:
            if not self._transport.test_all(self._reqs):
                wd = faults.current()
                if wd is not None:
                    wd.check(self.what, self._members)
                return False
        except Exception as e:  # noqa: BLE001 - kept for wait() and exception()
            self._error = e
            return True
        self._complete()
        return True

    def wait(self, timeout=None) -> bool:
        """Block until the operation is done (PyTorch's signature; returns True); errors are raised here."""
        if self._error is not None:
            raise self._error
        if not self._done:
            try:
                wait_requests(self._transport, self._reqs, self.what, self._members, self._where)
            except BaseException as e:
                self._error = e
                raise
            self._complete()
        return True

    def is_success(self) -> bool:
        """Whether the operation completed without an error."""
        return self.is_completed() and self._error is None

    def exception(self):
        """The error the operation ended with, or None."""
        return self._error

    def result(self) -> list:
        """The output tensors of the operation (after waiting for it)."""
        self.wait()
        return list(self._result or [])

    def get_future(self):
        """A Future whose value is the output tensors once the operation completes (PyTorch's Work.get_future)."""
        from ember.distributed.futures import Future

        return Future._of_work(self)

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"<Work {self.what} {state}>"


class CompletedWork(Work):
    """The handle of an operation that finished when it was called (world size 1, or inside a graph)."""

    def __init__(self, what: str, result=None) -> None:
        super().__init__(what, None, [], result=result)
        self._done = True
