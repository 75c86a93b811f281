"""Process groups: the default group of every rank (init_process_group) and subgroups (new_group).

A group holds its member ranks (global ranks, in group order) and a transport over its own MPI
communicator (a duplicate of MPI_COMM_WORLD, so an MPI program's own messages never mix with
Ember's). Without a launcher a process is a world of one on `SelfTransport` and needs no MPI.
"""

from __future__ import annotations

import datetime
import time

from ember import config
from ember.distributed import _env, checks, faults, rendezvous
from ember.distributed.errors import DistBackendError, DistError
from ember.distributed.transport import MPITransport, SelfTransport

BACKENDS = ("mpi", "gloo", "nccl")  # PyTorch's names are accepted, so their scripts run unchanged: MPI runs all
INIT_WAIT = 300.0  # seconds init_process_group waits for every rank of the job to reach it


class ProcessGroup:
    """A set of ranks that run collectives together (PyTorch's ProcessGroup)."""

    def __init__(self, ranks, transport, name: str, uid: int, check_level: str = checks.INFO) -> None:
        self.ranks = tuple(ranks)
        self.members = frozenset(self.ranks)
        self.transport = transport  # None on ranks outside the group
        self.name = name
        self.uid = uid  # the same on every rank (groups are made in the same order everywhere)
        self._index = {r: i for i, r in enumerate(self.ranks)}
        self.seq = 0  # collectives called on this group: the checks compare it, the heartbeats report it
        self.detail = check_level == checks.DETAIL
        # The checks exchange fingerprints on a communicator of their own (made now: it is collective).
        wanted = check_level != checks.OFF and transport is not None and transport.kind == "mpi"
        self.check_transport = transport.dup() if wanted else None

    def enter(self) -> int:
        """Count one more collective on this group; its number (1 for the first)."""
        self.seq += 1
        return self.seq

    def rank(self) -> int:
        """This process's rank in the group (-1 outside it)."""
        return self.transport.rank if self.transport is not None else -1

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    @property
    def is_member(self) -> bool:
        return self.transport is not None

    def group_rank(self, global_rank: int, what: str, arg: str) -> int:
        """The group rank of a global rank; a ValueError naming the op and argument if it is not a member."""
        if not isinstance(global_rank, int) or isinstance(global_rank, bool):
            raise TypeError(f"{what}: {arg} must be an int rank, got {type(global_rank).__name__}")
        try:
            return self._index[global_rank]
        except KeyError:
            raise ValueError(f"{what}: {arg}={global_rank} is not a rank of group {self.name} "
                             f"(ranks {list(self.ranks)})") from None

    def global_rank(self, group_rank: int) -> int:
        """The global rank of a group rank."""
        return self.ranks[group_rank]

    def free(self) -> None:
        for t in (self.transport, self.check_transport):
            if t is not None:
                t.free()
        self.transport = self.check_transport = None

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.name} ranks={list(self.ranks)}>"


class _State:
    def __init__(self) -> None:
        self.world: ProcessGroup | None = None
        self.groups: list = []
        self.made = 0  # groups made so far (their uids)
        self.check_level = checks.INFO
        self.world_transport = None  # MPI: the duplicate of COMM_WORLD that groups are made from
        self.timeout = faults.DEFAULT_TIMEOUT

    def progress(self) -> list:
        """[(uid, collectives called)] of this rank's groups, for the heartbeats (faults.py)."""
        return [(g.uid, g.seq) for g in list(self.groups) if g.is_member]


state = _State()


def _seconds(timeout) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout)
    raise ValueError(f"init_process_group: timeout must be a positive number of seconds or a timedelta, got {timeout!r}")


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Join the job's default process group (every rank calls this once; PyTorch's signature).

    The MPI launcher connects the ranks, so `init_method` and `store` are not needed (`ember run
    --nnodes` joins several machines' launches). `timeout` (seconds or a timedelta; default
    $EMBER_DISTRIBUTED_TIMEOUT) is how long another rank may stay silent (default 20 s) and how long a
    collective may wait (default 30 min, PyTorch's) before the job fails naming the ranks. Outside a
    launcher the process is a world of one, which runs any script unchanged.
    """
    if state.world is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if backend is not None and str(backend).split(":")[-1].split(",")[0].lower() not in BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; ember.distributed runs on MPI "
                         "('mpi'; PyTorch's 'gloo' and 'nccl' are accepted and also run on MPI)")
    given = _seconds(timeout) or _seconds(config.get("distributed_timeout"))
    secs = given or faults.DEFAULT_TIMEOUT
    level = checks.level()
    if _env.launched() is None:
        _env.refuse_torchrun_launch()
    if not _env.uses_mpi():
        if world_size not in (-1, 1) or rank not in (-1, 0):
            raise RuntimeError(
                f"init_process_group(world_size={world_size}, rank={rank}): this process was not started by an MPI "
                f"launcher, so it is a world of one. Start the ranks with {_env.LAUNCH}")
        transport = SelfTransport()
    else:
        MPI = _env.mpi()
        comm = MPI.COMM_WORLD
        local = _env.local_launch()
        if local is not None and local[0] > 1 and comm.Get_size() == 1:
            raise RuntimeError(
                f"init_process_group: the launcher started {local[0]} processes but MPI sees a world of one; "
                "mpi4py was probably built for another MPI than the launcher's mpiexec (use the mpiexec that "
                "comes with the MPI mpi4py uses, e.g. `ember run`)")
        nodes = _env.nodes()
        if nodes is not None:  # `ember run --nnodes K` on each machine: join the machines' worlds into one
            comm = rendezvous.join(comm, MPI, *nodes, wait=max(INIT_WAIT, secs))
        size, me = comm.Get_size(), comm.Get_rank()
        if world_size not in (-1, size) or rank not in (-1, me):
            raise ValueError(f"init_process_group(world_size={world_size}, rank={rank}): the MPI launcher started "
                             f"this process as rank {me} of {size}")
        transport = MPITransport(comm, MPI)
        transport = MPITransport(transport.dup_comm(), MPI)
    state.check_level = level
    state.timeout = secs
    state.world_transport = transport
    world = ProcessGroup(range(transport.size), transport, group_name or "WORLD", 0, level)
    state.made = 1
    if transport.kind == "mpi":
        _init_barrier(transport)
        collective_timeout = given or faults.DEFAULT_COLLECTIVE_TIMEOUT
        faults.install(faults.Watchdog(transport.dup_comm(), transport.MPI, secs, collective_timeout,
                                       state.progress))
    state.world = world
    state.groups = [world]


def _init_barrier(transport) -> None:
    """Wait (bounded) until every rank has joined, so the watchdogs start together."""
    (req,) = transport.ibarrier()
    limit = max(INIT_WAIT, state.timeout)
    deadline = time.monotonic() + limit
    while not req.Test():
        if time.monotonic() > deadline:
            raise DistBackendError(f"init_process_group on rank {transport.rank}: not every rank of the job reached "
                                   f"init_process_group within {limit:g} s")
        time.sleep(1e-4)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the default group and every subgroup (group=None), or release one subgroup."""
    if group is None or group is state.world:
        if state.world is None:
            raise RuntimeError("destroy_process_group: the default process group is not initialized")
        faults.uninstall()
        for g in state.groups:
            g.free()
        if state.world_transport is not None:
            state.world_transport.free()
        state.__init__()
        return
    if group in state.groups:
        state.groups.remove(group)
        group.free()


def is_initialized() -> bool:
    """Whether init_process_group has been called (and not destroyed)."""
    return state.world is not None


def is_available() -> bool:
    """ember.distributed is always available (without MPI, as a world of one)."""
    return True


def is_mpi_available() -> bool:
    """Whether the MPI engine (mpi4py) is installed."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def _world(what: str) -> ProcessGroup:
    if state.world is None:
        raise ValueError(f"{what}: Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return state.world


def resolve(group, what: str) -> ProcessGroup:
    """`group`, or the default group when None; errors name `what`."""
    world = _world(what)
    if group is None:
        return world
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group (or None), got {type(group).__name__}")
    if group not in state.groups:
        raise DistError(f"{what}: group {group.name} was destroyed")
    return group


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in `group` (default: the world); -1 if it is not a member."""
    return resolve(group, "get_rank").rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in `group` (default: the world)."""
    return resolve(group, "get_world_size").size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The engine of the group: always 'mpi'."""
    resolve(group, "get_backend")
    return "mpi"


def get_process_group_ranks(group: ProcessGroup) -> list:
    """The global ranks of `group`, in group order."""
    return list(resolve(group, "get_process_group_ranks").ranks)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of `group_rank` in `group`."""
    g = resolve(group, "get_global_rank")
    if not 0 <= group_rank < g.size():
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in group {g.name} of size {g.size()}")
    return g.global_rank(group_rank)


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank in `group` of global rank `global_rank`."""
    return resolve(group, "get_group_rank").group_rank(global_rank, "get_group_rank", "global_rank")


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization: bool = False,
              group_desc: str | None = None) -> ProcessGroup:
    """A group of some ranks (default: all). Every rank of the world must call it, members or not."""
    world = _world("new_group")
    size = world.size()
    members = list(range(size)) if ranks is None else list(ranks)
    for r in members:
        if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < size:
            raise ValueError(f"new_group: rank {r!r} is not a rank of the world (0 to {size - 1})")
    if len(set(members)) != len(members):
        raise ValueError(f"new_group: ranks must be distinct, got {members}")
    if not members:
        raise ValueError("new_group: a group needs at least one rank")
    wt = state.world_transport
    if wt.kind == "self":
        transport = SelfTransport()
    else:
        MPI = wt.MPI
        from ember.distributed.work import wait_requests

        # Every rank must be here (Create is a blocking collective): a barrier that notices failed peers first.
        wait_requests(wt, wt.ibarrier(), "new_group", None)
        comm = wt.comm.Create(wt.comm.Get_group().Incl(members))
        transport = MPITransport(comm, MPI) if comm != MPI.COMM_NULL else None
    name = group_desc or f"group{len(state.groups)}"
    group = ProcessGroup(members, transport, name, state.made, state.check_level)
    state.made += 1
    state.groups.append(group)
    return group


class _GroupNamespace:
    """`dist.group.WORLD`: the default group (PyTorch's spelling)."""

    @property
    def WORLD(self) -> ProcessGroup | None:  # noqa: N802
        return state.world


group = _GroupNamespace()
GroupMember = group
