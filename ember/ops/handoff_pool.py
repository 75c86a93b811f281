"""Worker threads that take a batch split's chunks (batch_threads.run), polling counters instead of sleeping.

A ThreadPoolExecutor hands a task over through a queue and a condition: its worker, asleep, is woken by
the kernel, and the caller is woken again for the result; 30-70 us a split on this project's VM, where a
layer's chunk of work can be 100 us. Here each worker has a posted and a done counter: the caller writes
the task and raises `posted`, the worker raises `done`; each side polls the other's counter without the
GIL (spin_wait.py) for a short while and only then sleeps on a condition. A worker polls for
IDLE_POLL_US after each task, which covers the gaps between the splits of consecutive layers; it
yields the core on every poll, so other threads still run.

The counters see a post within a microsecond, but the worker must then take the GIL to run the chunk's Python,
and the caller holds it until its own chunk enters compiled code: the worker sleeps on the GIL and is woken.
An empty split cost 31-33 us on this project's VM (2026-11-27), which halts an idle vCPU at once; with the guest
polling 200 us before it halts, 19 us. So a compiled kernel whose chunk is one call goes to native_pool.py, whose
workers never take the GIL (batch_threads.run_kernel); this pool takes the chunks that run Python.
"""

from __future__ import annotations

import threading

import numpy as np

IDLE_POLL_US = 300  # how long an idle worker polls for the next task before it sleeps
RESULT_POLL_US = 2000  # how long the caller polls for a worker's result before it sleeps


class HandoffPool:
    """`n` worker threads; run(tasks) runs tasks[0] in the caller and the others on the workers."""

    def __init__(self, n: int, wait_at_least, polls_per_us: float) -> None:
        self._wait = wait_at_least
        self._idle_polls = max(1, int(IDLE_POLL_US * polls_per_us))
        self._result_polls = max(1, int(RESULT_POLL_US * polls_per_us))
        self._posted = np.zeros(n, np.int64)
        self._done = np.zeros(n, np.int64)
        self._tasks: list = [None] * n
        self._results: list = [None] * n
        self._sleeping = [False] * n
        self._caller_sleeping = False
        self._cond = threading.Condition()
        self._busy = threading.Lock()  # one split at a time; a concurrent or nested one runs its chunks inline
        for w in range(n):
            threading.Thread(target=self._serve, args=(w,), name=f"ember-batch-{w}", daemon=True).start()

    def run(self, tasks: list) -> list:
        """Results of the zero-argument callables `tasks` (in order), the first run by the caller."""
        if len(tasks) == 1 or len(tasks) - 1 > len(self._tasks) or not self._busy.acquire(blocking=False):
            return [t() for t in tasks]
        try:
            helpers = range(len(tasks) - 1)
            for w in helpers:
                self._tasks[w] = tasks[w + 1]
                self._posted[w] += 1
            with self._cond:  # under the condition: a worker about to sleep sees the post, or is notified
                if any(self._sleeping[w] for w in helpers):
                    self._cond.notify_all()
            try:
                first = tasks[0]()
            finally:
                for w in helpers:
                    self._await_done(w)
                outcomes = [self._results[w] for w in helpers]
                for w in helpers:  # hold no chunk (and the arrays it closes over) past this split
                    self._tasks[w] = self._results[w] = None
            results = [first]
            for ok, value in outcomes:
                if not ok:
                    raise value
                results.append(value)
            return results
        finally:
            self._busy.release()

    def _await_done(self, w: int) -> None:
        target = int(self._posted[w])
        if self._wait(self._done, w, target, self._result_polls):
            return
        with self._cond:
            self._caller_sleeping = True
            while self._done[w] < target:
                self._cond.wait()
            self._caller_sleeping = False

    def _serve(self, w: int) -> None:
        seen = 0
        while True:
            seen += 1
            if not self._wait(self._posted, w, seen, self._idle_polls):
                with self._cond:
                    self._sleeping[w] = True
                    while self._posted[w] < seen:
                        self._cond.wait()
                    self._sleeping[w] = False
            try:
                self._results[w] = (True, self._tasks[w]())
            except BaseException as e:  # noqa: BLE001 - raised again in the caller
                self._results[w] = (False, e)
            with self._cond:
                self._done[w] = seen
                if self._caller_sleeping:
                    self._cond.notify_all()
