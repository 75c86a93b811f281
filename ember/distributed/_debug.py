"""EMBER_DISTRIBUTED_DEBUG=1: before each collective the ranks compare what they were called with.

Each rank sends a small signature (the op, how many collectives it called on the group before,
dtype, shape, root, reduce op) to all others; every rank sees the same table and raises the same
error naming the ranks that differ, instead of MPI mixing up mismatched buffers or hanging.
"""

from __future__ import annotations

import numpy as np

from ember.distributed.errors import DistError

_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier",
        "broadcast_object_list", "all_gather_object", "gather_object", "DistributedDataParallel")
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_MAX_DIMS = 8
_WIDTH = 6 + _MAX_DIMS


def _signature(seq: int, what: str, dtype, shape, root, op) -> np.ndarray:
    sig = np.full(_WIDTH, -1, np.int64)
    sig[0] = _OPS.index(what) if what in _OPS else len(_OPS)
    sig[1] = seq
    if dtype is not None:
        name = np.dtype(dtype).name
        sig[2] = _DTYPES.index(name) if name in _DTYPES else len(_DTYPES)
    if shape is not None:
        sig[3] = len(shape)
        sig[6:6 + min(len(shape), _MAX_DIMS)] = list(shape)[:_MAX_DIMS]
    sig[4] = -1 if root is None else root
    sig[5] = -1 if op is None else list(type(op)).index(op)
    return sig


def _describe(sig) -> str:
    what = _OPS[sig[0]] if sig[0] < len(_OPS) else "?"
    text = f"{what} #{sig[1]}"
    if sig[2] >= 0:
        text += f" {_DTYPES[sig[2]] if sig[2] < len(_DTYPES) else '?'}"
    if sig[3] >= 0:
        text += f" shape {tuple(int(d) for d in sig[6:6 + min(int(sig[3]), _MAX_DIMS)])}"
    if sig[4] >= 0:
        text += f" root {sig[4]}"
    return text


def check(group, what: str, dtype=None, shape=None, root=None, op=None, same_shape: bool = True) -> None:
    """Compare this call with the other ranks' (a no-op unless the group was made in debug mode)."""
    transport = group.debug_transport
    if transport is None:
        return
    from ember.distributed.work import wait_requests

    mine = _signature(group.seq, what, dtype, shape if same_shape else None, root, op)
    table = np.empty((transport.size, _WIDTH), np.int64)
    wait_requests(transport, transport.iallgather(mine, table), f"{what} (debug check)")
    cols = [0, 1, 2, 4, 5] + ([3] + list(range(6, _WIDTH)) if same_shape else [])
    if (table[:, cols] == table[0, cols]).all():
        return
    rows = "; ".join(f"rank {group.global_rank(r)}: {_describe(table[r])}" for r in range(transport.size))
    raise DistError(f"{what} on rank {group.global_rank(transport.rank)}: the ranks of group {group.name} "
                    f"called mismatched collectives (EMBER_DISTRIBUTED_DEBUG): {rows}")
