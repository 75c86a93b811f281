"""`Future`: a value that an asynchronous operation will produce (PyTorch's torch.futures.Future).

A Future is done when its value or error is set, or when the `Work` behind it (a collective started
with async_op=True; `Work.get_future()`) completes; its value is then the Work's output tensors.
`then(callback)` chains a Future whose value is `callback(this future)`, computed once this one is
done; the callbacks run in the thread that waits (or asks `done()`), not in a background thread.
"""

from __future__ import annotations

_UNSET = object()


class Future:
    """The eventual result of an operation: `wait()`, `value()`, `done()`, `then()`, `set_result()`."""

    def __init__(self, *, devices=None) -> None:
        self._value = _UNSET
        self._error: BaseException | None = None
        self._work = None  # a Work whose completion sets the value
        self._parent: Future | None = None  # for then(): the future this one follows
        self._callback = None
        self._done_callbacks: list = []

    @classmethod
    def _of_work(cls, work) -> Future:
        fut = cls()
        fut._work = work
        return fut

    def _settle(self, block: bool) -> bool:
        """Whether the future is done (waiting for it when `block`); computes a chained value on the way."""
        if self._value is not _UNSET or self._error is not None:
            return True
        try:
            if self._work is not None:
                if not block and not self._work.is_completed():
                    return False
                self._work.wait()
                self._set(self._work.result())
            elif self._parent is not None:
                if not self._parent._settle(block):
                    return False
                callback, self._callback = self._callback, None
                self._set(callback(self._parent))
            else:
                if block:
                    raise RuntimeError("Future.wait: no result was set and no operation will set it (call "
                                       "set_result first)")
                return False
        except BaseException as e:  # noqa: BLE001 - kept and raised by wait() / value()
            self._set_error(e)
        return True

    def _set(self, value) -> None:
        self._value = value
        self._run_done_callbacks()

    def _set_error(self, error: BaseException) -> None:
        self._error = error
        self._run_done_callbacks()

    def _run_done_callbacks(self) -> None:
        callbacks, self._done_callbacks = self._done_callbacks, []
        for cb in callbacks:
            cb(self)

    def done(self) -> bool:
        """Whether the value (or an error) is available; never blocks."""
        return self._settle(block=False)

    def wait(self):
        """Block until done; the value, or the operation's error raised here."""
        self._settle(block=True)
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        """The value of a completed future (waiting for it first, where PyTorch would require it be done)."""
        return self.wait()

    def then(self, callback) -> Future:
        """A future whose value is `callback(self)`, computed once this future is done."""
        if not callable(callback):
            raise TypeError(f"Future.then: callback must be callable, got {type(callback).__name__}")
        fut = Future()
        fut._parent, fut._callback = self, callback
        return fut

    def add_done_callback(self, callback) -> None:
        """Call `callback(self)` when the future is done (now, if it is)."""
        if self._value is not _UNSET or self._error is not None:
            callback(self)
        else:
            self._done_callbacks.append(callback)

    def set_result(self, result) -> None:
        """Complete the future with `result` (once)."""
        if self._value is not _UNSET or self._error is not None or self._work is not None or self._parent is not None:
            raise RuntimeError("Future.set_result: this future already has a value, or an operation sets it")
        self._set(result)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with an error, which wait() raises."""
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got {type(result).__name__}")
        if self._value is not _UNSET or self._error is not None:
            raise RuntimeError("Future.set_exception: this future already has a value")
        self._set_error(result)

    def __repr__(self) -> str:
        return f"<Future {'done' if self._value is not _UNSET or self._error is not None else 'pending'}>"


def wait_all(futures: list) -> list:
    """The values of every future, in order (waiting for each)."""
    return [f.wait() for f in futures]


def collect_all(futures: list) -> Future:
    """A future whose value is the list of `futures`, once every one of them is done."""
    futures = list(futures)

    def settle(_):
        for f in futures:
            f._settle(block=True)
        return futures

    start = Future()
    start.set_result(None)
    return start.then(settle)
