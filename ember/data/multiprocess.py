"""The main process side of a multi-process DataLoader: starting, feeding, watching and stopping workers."""

from __future__ import annotations

import itertools
import os
import queue
import signal
import time
import weakref
from typing import Any

from ember.data.lifeline import Lifeline
from ember.data.shm import free, sweep, unpack
from ember.data.worker import ExceptionWrapper, IterableEnd, worker_loop

# How long the main process waits on its result queue before checking that every worker is alive.
POLL_INTERVAL = 0.1
# How long workers get to finish their current batch and exit before they are terminated: after a
# normal end or an early break, and after an error (timeout, dead worker, Ctrl-C) when nobody waits.
SHUTDOWN_TIMEOUT = 5.0
ERROR_SHUTDOWN_TIMEOUT = 0.5

_uid = itertools.count()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "is not running"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class WorkerPool:
    """Worker processes with one index queue each and a shared result queue.

    It holds no reference to the iterator that uses it, so a `weakref.finalize` on the iterator can
    shut it down when the iterator (or its DataLoader) is garbage-collected.
    """

    def __init__(self, ctx, num_workers: int, dataset, is_iterable: bool, auto_collation: bool, collate_fn,
                 drop_last: bool, base_seed: int, worker_init_fn) -> None:
        self.owner_pid = os.getpid()
        self.prefix = f"emb{os.getpid():x}x{next(_uid):x}w"
        self.closed = False
        self.workers: list = []
        self.index_queues: list = []
        self.result_queue = ctx.Queue()
        self.lifeline = Lifeline()
        if os.name == "posix":
            # Workers must share the main process's resource tracker, or each would start its own
            # and warn about segments that the main process has already unlinked.
            from multiprocessing import resource_tracker

            resource_tracker.ensure_running()
        try:
            for wid in range(num_workers):
                iq = ctx.Queue()
                iq.cancel_join_thread()  # a dead worker's full pipe must not block our exit
                w = ctx.Process(
                    target=worker_loop,
                    args=(wid, num_workers, dataset, is_iterable, auto_collation, collate_fn, drop_last,
                          base_seed + wid, worker_init_fn, iq, self.result_queue, self.prefix, self.lifeline.reader,
                          self.lifeline.kill_with_parent),
                    daemon=True,
                    name=f"ember-dataloader-worker-{wid}",
                )
                w.start()
                self.index_queues.append(iq)
                self.workers.append(w)
        except BaseException:
            self.shutdown()
            raise

    def put(self, wid: int, task) -> None:
        """Send a task to one worker."""
        self.index_queues[wid].put(task)

    def check_alive(self) -> None:
        """Raise if a worker died without being asked to stop."""
        for wid, w in enumerate(self.workers):
            if not w.is_alive():
                code, pid = w.exitcode, w.pid
                self.shutdown(ERROR_SHUTDOWN_TIMEOUT)
                raise RuntimeError(
                    f"DataLoader worker {wid} (pid {pid}) {_describe_exit(code)} while the main process was "
                    f"waiting for a batch; the worker may have run out of memory or been killed"
                )

    def get(self, timeout: float) -> tuple[int, Any]:
        """The next (idx, data) from any worker; raises RuntimeError on timeout (>0) or a dead worker."""
        start = time.monotonic()
        last_check = start
        while True:
            wait = POLL_INTERVAL
            if timeout > 0:
                wait = max(0.0, min(wait, start + timeout - time.monotonic()))
            try:
                payload = self.result_queue.get(timeout=wait)
            except queue.Empty:
                payload = None
            now = time.monotonic()
            if payload is not None:
                if now - last_check > POLL_INTERVAL:  # a busy queue must not hide a dead worker
                    self.check_alive()
                return unpack(payload)
            self.check_alive()
            last_check = now
            if timeout > 0 and now - start >= timeout:
                self.shutdown(ERROR_SHUTDOWN_TIMEOUT)
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds waiting for a batch from its workers")

    def shutdown(self, grace: float = SHUTDOWN_TIMEOUT) -> None:
        """Stop every worker (terminating any still busy after `grace` seconds), free their shared memory. Idempotent."""
        if self.closed or os.getpid() != self.owner_pid:  # a forked copy of this object owns nothing
            return
        self.closed = True
        try:
            for iq in self.index_queues:
                try:
                    iq.put(None)
                except (OSError, ValueError):
                    pass
            # Drain while the workers exit: a worker's queue thread must flush before the process can end.
            deadline = time.monotonic() + grace
            while any(w.is_alive() for w in self.workers) and time.monotonic() < deadline:
                self._drain(0.05)
            for w in self.workers:
                if w.is_alive():
                    w.terminate()
            for w in self.workers:
                w.join(timeout=1.0)
                if w.is_alive():
                    w.kill()
                    w.join(timeout=1.0)
            self._drain(0.0)
        finally:
            for q in [*self.index_queues, self.result_queue]:
                q.cancel_join_thread()
                q.close()
            for w in self.workers:
                try:
                    w.close()
                except ValueError:  # still running after kill(): nothing more we can do
                    pass
            self.lifeline.close()
            sweep(self.prefix)

    def _drain(self, timeout: float) -> None:
        while True:
            try:
                payload = self.result_queue.get(timeout=timeout)
            except (queue.Empty, OSError, ValueError, EOFError):
                return
            free(payload)
            timeout = 0.0


class MultiProcessIter:
    """Batches from worker processes, yielded in sampler order."""

    def __init__(self, loader, index_iter, base_seed: int, is_iterable: bool, auto_collation: bool,
                 collate_fn) -> None:
        # No reference back to the owning iterator: it must be free to be collected (and so shut us down).
        self._index_iter = index_iter
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._prefetch = (loader.prefetch_factor or 2) * loader.num_workers
        ctx = loader.multiprocessing_context
        if ctx is None or isinstance(ctx, str):
            import multiprocessing

            ctx = multiprocessing.get_context(ctx)
        self._pool = WorkerPool(
            ctx, loader.num_workers, loader.dataset, is_iterable, auto_collation, collate_fn,
            loader.drop_last, base_seed, loader.worker_init_fn,
        )
        self._finalizer = weakref.finalize(self, self._pool.shutdown)
        self._send_idx = 0
        self._start_epoch(first=True)

    @property
    def closed(self) -> bool:
        """Whether the workers have been stopped."""
        return self._pool.closed

    def _start_epoch(self, first: bool) -> None:
        self._epoch_start = self._send_idx
        self._rcvd_idx = self._send_idx
        self._task_worker: dict[int, int] = {}
        self._early: dict[int, Any] = {}
        self._active = [True] * self._num_workers
        self._cycle = itertools.cycle(range(self._num_workers))
        if not first:
            for wid in range(self._num_workers):
                self._pool.put(wid, ("reset",))
        for _ in range(self._prefetch):
            self._send_one()

    def reset(self, index_iter) -> None:
        """Start a new epoch on the same (persistent) workers; stale batches are dropped as they arrive."""
        self._index_iter = index_iter
        self._start_epoch(first=False)

    def _send_one(self) -> None:
        if not any(self._active):
            return
        try:
            index = next(self._index_iter)
        except StopIteration:
            return
        for wid in self._cycle:
            if self._active[wid]:
                break
        self._pool.put(wid, ("batch", self._send_idx, index))
        self._task_worker[self._send_idx] = wid
        self._send_idx += 1

    def next(self):
        """The next batch in order; StopIteration at the end of the epoch (or once the workers are stopped)."""
        if self._pool.closed:
            raise StopIteration
        while True:
            # Tasks sent to a worker whose iterable dataset ran out will never give a batch: skip them.
            while self._rcvd_idx < self._send_idx and self._rcvd_idx not in self._early \
                    and not self._active[self._task_worker[self._rcvd_idx]]:
                del self._task_worker[self._rcvd_idx]
                self._rcvd_idx += 1
            if self._rcvd_idx >= self._send_idx:
                if not self._persistent:
                    self.close()
                raise StopIteration
            if self._rcvd_idx in self._early:
                data = self._early.pop(self._rcvd_idx)
                del self._task_worker[self._rcvd_idx]
                self._rcvd_idx += 1
                self._send_one()
                if isinstance(data, ExceptionWrapper):
                    data.reraise()
                return data
            idx, data = self._pool.get(self._timeout)
            if idx < self._epoch_start:
                continue  # a batch of an epoch that was abandoned
            if isinstance(data, IterableEnd):
                self._active[data.worker_id] = False
                self._send_one()
                continue
            self._early[idx] = data

    def close(self, error: bool = False) -> None:
        """Stop the workers now (also done when the iterator is garbage-collected); quickly after an error."""
        if error:
            self._pool.shutdown(ERROR_SHUTDOWN_TIMEOUT)
        self._finalizer()
