"""`ember.distributed`: training across processes and machines on MPI (mpi4py), with PyTorch's names.

- process groups and collectives on tensors: `init_process_group`, `all_reduce`, `broadcast`, ...
  (group.py, collectives.py; zero-copy on CPU tensors, nonblocking underneath, `Work` handles);
- `DistributedDataParallel` with communication hooks (`register_comm_hook`, algorithms/ddp_comm_hooks),
  `DistributedSampler`, `SyncBatchNorm` (ddp.py, sampler.py, sync_batchnorm.py);
- a parameter server with MXNet's KVStore verbs (`ember.distributed.ps`);
- the transport under TF1 graphs split across processes (`ember.v1` with `/job:ps/task:0` devices; the
  graph side is ember/v1/remote.py);
- checks that the ranks call matching collectives (checks.py), failure and timeout detection
  (faults.py), and the `ember run` launcher (launch.py: hostfiles, --nnodes via rendezvous.py,
  --max-restarts via elastic.py).

Nothing here imports mpi4py until a process group needs it; without a launcher a script runs as a
world of one. See docs/distributed.md.
"""

from ember.distributed import nn
from ember.distributed.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    broadcast_object_list,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from ember.distributed.ddp import DistributedDataParallel
from ember.distributed.errors import DistBackendError, DistError
from ember.distributed.grad_bucket import GradBucket
from ember.distributed.group import (
    GroupMember,
    ProcessGroup,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    new_group,
)
from ember.distributed.reduce_op import ReduceOp
from ember.distributed.sampler import DistributedSampler
from ember.distributed.sync_batchnorm import SyncBatchNorm
from ember.distributed.work import Work

__all__ = [
    "DistBackendError", "DistError", "DistributedDataParallel", "GradBucket", "DistributedSampler", "SyncBatchNorm", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single", "barrier",
    "broadcast", "broadcast_object_list", "destroy_process_group", "gather", "get_backend", "get_global_rank",
    "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group",
    "irecv", "is_available", "is_initialized", "is_mpi_available", "isend", "new_group", "nn", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
]
