"""Roles of the ranks: workers first, then servers (`ember run --servers S` makes the last S ranks servers).

The parameter server (ember.distributed.ps) and ember.v1's `/job:ps` and `/job:worker` devices both
read this: with W workers and S servers, rank w < W is worker w (`/job:worker/task:w`) and rank W + s
is server s (`/job:ps/task:s`). Rank 0 is worker 0, the chief.
"""

from __future__ import annotations

from ember import config

_declared: list = [None]  # S as a tf.train.ClusterSpec gave it (checked against the run)


def declare_servers(servers: int) -> None:
    """Use S servers (tf.train.Server does this with its ClusterSpec's ps task count)."""
    _declared[0] = int(servers)


def num_servers(world_size: int) -> int:
    """S: as declared by tf.train.Server's cluster, else $EMBER_NUM_SERVERS (`ember run --servers S`), else 0."""
    if _declared[0] is not None:
        return _declared[0]
    s = config.get("num_servers")
    if s >= world_size and s > 0:
        raise ValueError(f"EMBER_NUM_SERVERS={s} leaves no worker in a world of {world_size} ranks; "
                         "use ember run -n N --servers S with S < N")
    return s


def task_of(rank: int, world_size: int, servers: int | None = None) -> tuple:
    """("worker", w) or ("ps", s) for a global rank."""
    servers = num_servers(world_size) if servers is None else servers
    workers = world_size - servers
    return ("worker", rank) if rank < workers else ("ps", rank - workers)


def rank_of(job: str, task: int, world_size: int, servers: int | None = None) -> int:
    """The global rank of /job:<job>/task:<task>; a ValueError naming the job's tasks when there is no such task."""
    servers = num_servers(world_size) if servers is None else servers
    workers = world_size - servers
    count = {"worker": workers, "ps": servers}.get(job)
    if count is None:
        raise ValueError(f"unknown job {job!r}: the jobs are 'worker' ({workers} tasks) and 'ps' ({servers} tasks)")
    if not isinstance(task, int) or not 0 <= task < count:
        raise ValueError(f"/job:{job}/task:{task} does not exist: job {job!r} has {count} task(s) in this run "
                         f"(ember run -n {world_size} --servers {servers})")
    return task if job == "worker" else workers + task
