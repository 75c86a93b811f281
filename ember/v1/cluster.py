"""`tf.train.ClusterSpec`, `tf.train.Server` and `tf.train.replica_device_setter` on MPI ranks.

Under `ember run -n N --servers S` rank w < N - S is `/job:worker/task:w` and the last S ranks are
`/job:ps/task:0..S-1` (ember.distributed.cluster). A ClusterSpec's host addresses are not used (the
MPI launcher connects the processes); its task counts must match the run. `Server(cluster)` connects
the ranks (every rank creates one) and says which task this process is; `server.join()` serves the
graph parts other processes place here until every worker is done.
"""

from __future__ import annotations

from ember import config as settings  # `config` is Server's argument, as in TF


class ClusterSpec:
    """Jobs and their tasks: {"ps": [addresses], "worker": [addresses]} (or {job: {task: address}})."""

    def __init__(self, cluster) -> None:
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if not isinstance(cluster, dict):
            raise TypeError(f"ClusterSpec: expected a dict of job name -> addresses, got {type(cluster).__name__}")
        self._jobs: dict = {}
        for job, tasks in cluster.items():
            if isinstance(tasks, dict):
                self._jobs[job] = {int(i): a for i, a in tasks.items()}
            else:
                self._jobs[job] = dict(enumerate(tasks))

    @property
    def jobs(self) -> list:
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        """How many tasks the job has."""
        if job_name not in self._jobs:
            raise ValueError(f"ClusterSpec: no such job {job_name!r} (jobs: {self.jobs})")
        return len(self._jobs[job_name])

    def task_indices(self, job_name: str) -> list:
        """The task indices of a job."""
        return sorted(self._jobs[job_name])

    def job_tasks(self, job_name: str) -> list:
        """The addresses of a job's tasks, in task order."""
        return [self._jobs[job_name][i] for i in self.task_indices(job_name)]

    def as_dict(self) -> dict:
        """The jobs as {job: [addresses]}."""
        return {job: self.job_tasks(job) for job in self._jobs}

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()})"


class Server:
    """This process's place in the cluster (every rank creates one); `join()` serves until the workers are done."""

    def __init__(self, server_or_cluster_def=None, job_name: str | None = None, task_index: int | None = None,
                 protocol: str | None = None, config=None, start: bool = True) -> None:
        from ember.distributed import cluster as roles
        from ember.distributed.group import init_process_group, state
        from ember.v1 import remote

        spec = None if server_or_cluster_def is None else ClusterSpec(server_or_cluster_def)
        if state.world is None:
            init_process_group()
        size, rank = state.world.size(), state.world.rank()
        if spec is not None:
            unknown = [j for j in spec.jobs if j not in ("ps", "worker")]
            if unknown:
                raise ValueError(f"Server: jobs {unknown} are not supported; under MPI the jobs are 'worker' and 'ps'")
            want = {job: spec.num_tasks(job) if job in spec.jobs else 0 for job in ("worker", "ps")}
            flag = settings.NUM_SERVERS.get()
            if want["worker"] + want["ps"] != size or flag not in (0, want["ps"]):
                have = f"{size} ranks" + (f" with --servers {flag}" if flag else "")
                raise ValueError(
                    f"Server: the cluster has {want['worker']} worker and {want['ps']} ps tasks, but this run has "
                    f"{have}; start it with ember run -n {want['worker'] + want['ps']} --servers {want['ps']}")
            roles.declare_servers(want["ps"])
        servers = roles.num_servers(size)
        job, task = roles.task_of(rank, size, servers)
        if job_name is not None and (job_name, int(task_index or 0)) != (job, task):
            raise ValueError(
                f"Server(job_name={job_name!r}, task_index={task_index}): under MPI the rank decides the task, and "
                f"rank {rank} is /job:{job}/task:{task} (workers first, the last --servers ranks are ps); create "
                "Server(cluster) and read server.job_name and server.task_index")
        self.job_name, self.task_index = job, task
        self.server_def = spec
        remote.declare_task(job, task)
        remote.start()
        self.target = f"mpi://rank{rank}"

    def join(self) -> None:
        """Run the graph parts other processes place here until every worker has finished (then return)."""
        from ember.v1 import remote

        if remote._rt[0] is None:
            return  # a world of one: nothing to serve
        remote.serve()

    def start(self) -> None:
        """The server starts when it is made (kept for TF's API)."""

    @staticmethod
    def create_local_server(config=None, start: bool = True) -> Server:
        """A one-process cluster (a single worker task)."""
        return Server({"worker": ["localhost:0"]})


_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable", "MutableHashTableV2",
           "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
           "MutableDenseHashTableV2", "VarHandleOp")


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps", worker_device: str = "/job:worker",
                          merge_devices: bool = True, cluster=None, ps_ops=None, ps_strategy=None):
    """A device function for tf.device: variables round-robin over the ps tasks, every other op on worker_device.

    Returns None (no placement) when there are no ps tasks, as TF does.
    """
    if cluster is not None:
        spec = ClusterSpec(cluster)
        ps_tasks = spec.num_tasks("ps") if "ps" in spec.jobs else 0
    if not ps_tasks:
        return None
    ps_ops = tuple(ps_ops) if ps_ops is not None else _PS_OPS
    counter = [0]

    def round_robin(op) -> int:
        task = counter[0] % ps_tasks
        counter[0] += 1
        return task

    strategy = ps_strategy or round_robin

    def place(op) -> str:
        if op.type in ps_ops:
            return f"{ps_device.rstrip('/')}/task:{strategy(op)}"
        return worker_device

    return place
