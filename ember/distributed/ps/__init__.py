"""A parameter server with MXNet's KVStore verbs: `init`, `push`, `pull`, `pushpull`.

Workers push gradients and pull parameters; servers (the last `--servers` ranks of `ember run -n N
--servers S`) hold the parameters, sharded over the servers by key, and apply the optimizer.
`create("dist_sync")`: a pull returns the parameters after every worker's push of the round was
summed and applied (single-process SGD on the summed batch); `create("dist_async", max_staleness=s)`:
each push is applied as it arrives, and a worker more than `s` pushes ahead of the slowest waits.
On a server rank `create` serves until every worker has closed its store and then ends the process,
as MXNet's server processes do.
"""

from ember.distributed.ps.kvstore import KVStore, create, is_server

__all__ = ["KVStore", "create", "is_server"]
