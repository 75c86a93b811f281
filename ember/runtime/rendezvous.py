"""Where the devices of one placed graph run meet: values handed over by key, waits with a timeout.

Each run of a placed graph makes one `Rendezvous`; every device's worker thread binds it while it
runs its part, so the send and recv kernels find it with `current()`. When any part fails the run
is aborted: waiting receivers wake up at once with `Cancelled` instead of waiting out the timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

RECV_TIMEOUT = 300.0  # seconds a recv waits for its send before the run is declared stuck


class Cancelled(RuntimeError):
    """This device's part stopped because another device's part failed."""


class Rendezvous:
    """A one-run mailbox: `put(key, value)` once, `take(key)` blocks until it is there."""

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = RECV_TIMEOUT if timeout is None else timeout
        self._values: dict = {}
        self._cond = threading.Condition()
        self._aborted: BaseException | None = None

    def put(self, key: str, value) -> None:
        """Hand `value` to whoever takes `key` (raises Cancelled once the run is aborted)."""
        with self._cond:
            if self._aborted is not None:
                raise Cancelled(f"send {key}: the run was cancelled ({self._aborted!r})")
            self._values[key] = value
            self._cond.notify_all()

    def take(self, key: str, src=None):
        """The value put under `key`, waiting for it up to the timeout."""
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while key not in self._values:
                if self._aborted is not None:
                    raise Cancelled(f"recv {key}: the run was cancelled ({self._aborted!r})")
                left = deadline - time.monotonic()
                if left <= 0:
                    where = f" from {src}" if src is not None else ""
                    raise TimeoutError(f"recv {key}: nothing arrived{where} within {self.timeout:g} s")
                self._cond.wait(left)
            return self._values.pop(key)

    def abort(self, error: BaseException) -> None:
        """Stop the run: pending and later puts and takes raise Cancelled (the first error is kept)."""
        with self._cond:
            if self._aborted is None:
                self._aborted = error
            self._cond.notify_all()


class _Current(threading.local):
    rendezvous: Rendezvous | None = None


_current = _Current()


def current() -> Rendezvous:
    """The rendezvous of the placed run this thread is working for."""
    rv = _current.rendezvous
    if rv is None:
        raise RuntimeError("send/recv of a device part ran outside a placed graph run (no rendezvous bound)")
    return rv


@contextlib.contextmanager
def bind(rv: Rendezvous) -> Iterator[Rendezvous]:
    """Make `rv` this thread's current rendezvous inside the block."""
    prev = _current.rendezvous
    _current.rendezvous = rv
    try:
        yield rv
    finally:
        _current.rendezvous = prev
