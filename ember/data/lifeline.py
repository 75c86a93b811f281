"""Workers die with their main process: a pipe only the main process can write to, watched by a thread in each worker.
DataLoader workers and `ember tune --jobs` workers use it.

The main process keeps the pipe's write end and never writes; when it dies, for any reason, the kernel
closes that end and every worker's read end reports end-of-file at once. The read end is watched by a
thread, so a worker stuck in a dataset's `__getitem__` exits too. The write end must be held by the main
process alone: a later forked process (the next worker, another loader's worker) would otherwise
inherit it and keep the pipe open after the main process is gone, so every fork closes its copies.
As a second line on Linux, a worker asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG),
for a worker so busy in C code that the watching thread never runs; the kernel sends it when the
*thread* that started the worker ends, so only workers started from the main thread ask for it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading

from ember.kernels.process import die_with_parent

_write_ends: set = set()  # write ends of this process's lifelines: never to be held by a forked child
_hook_registered = False


def _close_inherited_write_ends() -> None:
    for conn in _write_ends:
        conn.close()  # the child's copy of the object: closing it also stops it closing a reused fd later
    _write_ends.clear()


class Lifeline:
    """The main process's side: a pipe whose read end goes to each worker (`reader`), the write end stays here."""

    def __init__(self) -> None:
        global _hook_registered
        if not _hook_registered and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_close_inherited_write_ends)
            _hook_registered = True
        self.reader, self._writer = multiprocessing.Pipe(duplex=False)
        _write_ends.add(self._writer)
        # A worker may ask to be killed with its parent only if its parent is this process's main thread.
        self.kill_with_parent = threading.current_thread() is threading.main_thread()

    def close(self) -> None:
        """Let go of both ends (after the workers are stopped: closing the write end tells them to exit)."""
        _write_ends.discard(self._writer)
        self._writer.close()
        self.reader.close()


def watch(reader, kill_with_parent: bool) -> None:
    """In a worker: exit this process as soon as the main process is gone (the pipe's write end closed)."""
    if kill_with_parent:
        die_with_parent()

    def wait_for_parent() -> None:
        try:
            reader.poll(None)  # nothing is ever written: readable means end-of-file, the main process is gone
        except (OSError, EOFError, ValueError):
            pass
        os._exit(1)  # not sys.exit: the main thread may be stuck in user code, and no cleanup may wait on it

    # Started after the prctl call, so a parent that died before it is seen here (the pipe is already closed).
    threading.Thread(target=wait_for_parent, name="ember-lifeline", daemon=True).start()
