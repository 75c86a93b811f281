"""How many worker threads the dependency engine runs: independent ops at once (`em.set_num_interop_threads` /
`em.get_num_interop_threads`, as PyTorch's). The threads inside one op are the other setting,
`em.set_num_threads` (ember.kernels.parallel)."""

from __future__ import annotations

from ember import config

_num_threads: list = []


def get_num_interop_threads() -> int:
    """The number of engine worker threads (independent kernels that may run at once)."""
    if not _num_threads:
        from ember.kernels.parallel import cores

        _num_threads.append(config.NUM_INTEROP_THREADS.get() or max(1, min(cores(), 8)))
    return _num_threads[0]


def set_num_interop_threads(n: int) -> None:
    """Set the number of engine worker threads; waits for queued work before resizing the pool."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive int, got {n!r}")
    if n == get_num_interop_threads():
        return
    from ember.runtime import engine

    engine.resize(n)
    _num_threads[0] = n
