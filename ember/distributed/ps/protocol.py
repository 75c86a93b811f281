"""The messages between parameter-server workers and servers (pickled over a communicator of their own)."""

from __future__ import annotations

import zlib

REQUEST, REPLY = 11, 12  # tags: worker -> server, server -> worker

# requests: (verb, worker, ...)
INIT = "init"  # (INIT, w, key, array): worker 0's value is the key's initial value; replied when the key exists
OPTIMIZER = "optimizer"  # (OPTIMIZER, w, spec): the update rule, sent by worker 0; replied
PUSH = "push"  # (PUSH, w, key, array): not replied (errors come back with the worker's next reply)
PULL = "pull"  # (PULL, w, key): replied with the value when the mode allows
CLOSE = "close"  # (CLOSE, w): this worker is done; replied

# replies: ("ok", key, value-or-None) or ("error", message)


def server_of(key, servers: int) -> int:
    """Which server (0..servers-1) holds `key`: a stable hash, the same on every rank and run."""
    return zlib.crc32(repr(key).encode()) % servers
