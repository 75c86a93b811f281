"""How many worker threads the dependency engine runs (`em.set_num_threads` / `em.get_num_threads`)."""

from __future__ import annotations

import os


def _default_threads() -> int:
    env = os.environ.get("EMBER_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return max(1, min(os.cpu_count() or 1, 8))


_num_threads = [_default_threads()]


def get_num_threads() -> int:
    """The number of engine worker threads (independent kernels that may run at once)."""
    return _num_threads[0]


def set_num_threads(n: int) -> None:
    """Set the number of engine worker threads; waits for queued work before resizing the pool."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    if n == _num_threads[0]:
        return
    from ember.runtime import engine

    engine.resize(n)
    _num_threads[0] = n
