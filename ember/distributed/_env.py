"""Where this process runs: which launcher started it (from its environment) and the MPI engine (mpi4py).

mpi4py is imported only here and only when a process group needs it, so `import ember.distributed`
works without the `distributed` extra, and a script run with plain `python` (world size 1) needs no MPI.
"""

from __future__ import annotations

import sys

from ember import config

INSTALL = "pip install 'ember[distributed]' (mpi4py, and the mpich wheel that puts mpiexec on the PATH)"
LAUNCH = "ember run -n N script.py (or mpiexec -n N python script.py, or srun --mpi=pmix python script.py)"

# (size variable, rank variable) set by the launchers Ember knows: MPICH's Hydra, Open MPI, Slurm, MVAPICH.
_LAUNCHERS = (
    ("PMI_SIZE", "PMI_RANK"),
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID"),
    ("MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"),
)


def local_launch() -> tuple | None:
    """(size, rank) of this process in the launch that started it (one machine's under --nnodes), else None."""
    for size_var, rank_var in _LAUNCHERS:
        size, rank = config.outside(size_var), config.outside(rank_var)
        if size is not None and rank is not None and size.isdigit() and rank.isdigit():
            return int(size), int(rank)
    pmix = config.outside("PMIX_RANK") or ""
    if pmix.isdigit():  # a PMIx launcher that sets no size variable
        return -1, int(pmix)
    return None


def nodes() -> tuple | None:
    """(nnodes, node rank, master address, master port, restart) under `ember run --nnodes K` with K > 1."""
    nnodes = config.get("nnodes")
    if nnodes < 2:
        return None
    node, addr, port = config.get("node_rank"), config.outside("MASTER_ADDR"), config.outside("MASTER_PORT") or ""
    if node is None or addr is None or not port.isdigit():
        raise RuntimeError("EMBER_NNODES is set, but EMBER_NODE_RANK, MASTER_ADDR or MASTER_PORT is missing or "
                           "not a number; start every machine's ranks with ember run --nnodes K --node-rank I "
                           "--master-addr A --master-port P")
    return nnodes, node, addr, int(port), config.get("restart_count")


def launched() -> tuple | None:
    """(world size, rank) when a launcher started this process, else None (the whole job's under --nnodes)."""
    local = local_launch()
    multi = nodes()
    if local is None or multi is None or local[0] < 1:
        return local
    size, rank = local
    return multi[0] * size, multi[1] * size + rank


def refuse_torchrun_launch() -> None:
    """A RuntimeError when torchrun's variables say this process is one rank of several without an MPI launcher.

    Such processes were started by torchrun or by hand; MPI cannot join them (MPICH's processes started
    without mpiexec cannot connect to each other), and going on would train one separate model per process.
    """
    size, rank = config.outside("WORLD_SIZE") or "", config.outside("RANK") or ""
    if not size.isdigit() or int(size) < 2:
        return
    where = f"MASTER_ADDR={config.outside('MASTER_ADDR')} " if config.outside("MASTER_ADDR") else ""
    raise RuntimeError(
        f"init_process_group: RANK={rank or '?'} WORLD_SIZE={size} {where}say this process is one of {size} started "
        f"by torchrun or by hand, but ember.distributed connects its ranks through MPI; start them with "
        f"`ember run --nproc-per-node {size} script.py` (torchrun's flags: on each of K machines, ember run "
        "--nnodes K --node-rank I --master-addr A --master-port P --nproc-per-node N script.py)")


def uses_mpi() -> bool:
    """Whether the process group runs on MPI: under a launcher, or when the program already imported mpi4py.MPI."""
    return launched() is not None or "mpi4py.MPI" in sys.modules


def mpi():
    """The mpi4py.MPI module; a clear error saying how to install it when the extra is missing."""
    try:
        import mpi4py
    except ImportError:
        raise RuntimeError(f"ember.distributed: the MPI engine is not installed (no module mpi4py): {INSTALL}") from None
    # Collectives may be waited on from the graph engine's threads and the watchdog thread.
    mpi4py.rc.thread_level = "multiple"
    from mpi4py import MPI

    return MPI
