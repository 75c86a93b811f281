"""Where this process runs: which launcher started it (from its environment) and the MPI engine (mpi4py).

mpi4py is imported only here and only when a process group needs it, so `import ember.distributed`
works without the `distributed` extra, and a script run with plain `python` (world size 1) needs no MPI.
"""

from __future__ import annotations

import os
import sys

INSTALL = "pip install 'ember[distributed]' (mpi4py, and the mpich wheel that puts mpiexec on the PATH)"
LAUNCH = "ember run -n N script.py (or mpiexec -n N python script.py, or srun --mpi=pmix python script.py)"

# (size variable, rank variable) set by the launchers Ember knows: MPICH's Hydra, Open MPI, Slurm, MVAPICH.
_LAUNCHERS = (
    ("PMI_SIZE", "PMI_RANK"),
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID"),
    ("MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"),
)


def launched() -> tuple | None:
    """(world size, rank) when an MPI launcher started this process, else None."""
    for size_var, rank_var in _LAUNCHERS:
        size, rank = os.environ.get(size_var), os.environ.get(rank_var)
        if size is not None and rank is not None and size.isdigit() and rank.isdigit():
            return int(size), int(rank)
    if os.environ.get("PMIX_RANK", "").isdigit():  # a PMIx launcher that sets no size variable
        return -1, int(os.environ["PMIX_RANK"])
    return None


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
