"""Before each collective the ranks compare what they were called with, so a mismatch is an Ember error.

MPI given mismatched buffers aborts the job from inside (a truncated message, an assertion) or, when
the byte counts happen to agree, mixes the data silently. So each collective first all-reduces a small
fingerprint of the call (MAX over the values and their negations gives the maximum and the minimum at
once): the op, how many collectives this rank has called on the group, the dtype, the element count,
the root and the reduce op. Where the ranks disagree, every rank sees it, gathers the full signatures
and raises the same DistError naming each rank's call. The level is $EMBER_DISTRIBUTED_DEBUG (as
PyTorch's TORCH_DISTRIBUTED_DEBUG): unset or INFO compares as above, DETAIL (or 1) compares the full
shapes too ((2, 3) against (3, 2)), OFF skips the check (one small allreduce per collective saved).
"""

from __future__ import annotations

import numpy as np

from ember import config
from ember.distributed.errors import DistError

OFF, INFO, DETAIL = "OFF", "INFO", "DETAIL"
_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier",
        "broadcast_object_list", "all_gather_object", "gather_object", "DistributedDataParallel")
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_MAX_DIMS = 8
_WIDTH = 7 + _MAX_DIMS  # op, seq, dtype, root, reduce op, element count, ndim, dims
_CHEAP = 6  # the columns compared at INFO (ndim and dims only at DETAIL)


def level() -> str:
    """OFF, INFO (the default) or DETAIL, from $EMBER_DISTRIBUTED_DEBUG (ember.config)."""
    return {"off": OFF, "info": INFO, "detail": DETAIL}[config.get("distributed_debug")]


def _signature(seq: int, what: str, dtype, shape, root, op) -> np.ndarray:
    sig = np.full(_WIDTH, -1, np.int64)
    sig[0] = _OPS.index(what) if what in _OPS else len(_OPS)
    sig[1] = seq
    if dtype is not None:
        name = np.dtype(dtype).name
        sig[2] = _DTYPES.index(name) if name in _DTYPES else len(_DTYPES)
    sig[3] = -1 if root is None else root
    sig[4] = -1 if op is None else list(type(op)).index(op)
    if shape is not None:
        sig[5] = int(np.prod(shape, dtype=np.int64))
        sig[6] = len(shape)
        sig[7:7 + min(len(shape), _MAX_DIMS)] = list(shape)[:_MAX_DIMS]
    return sig


def _describe(sig) -> str:
    what = _OPS[sig[0]] if sig[0] < len(_OPS) else "?"
    text = f"{what} #{sig[1]}"
    if sig[2] >= 0:
        text += f" {_DTYPES[sig[2]] if sig[2] < len(_DTYPES) else '?'}"
    if sig[6] >= 0:
        text += f" shape {tuple(int(d) for d in sig[7:7 + min(int(sig[6]), _MAX_DIMS)])}"
    if sig[3] >= 0:
        text += f" root {sig[3]}"
    return text


_SIGNATURES: dict = {}  # (what, dtype, shape, root, op) -> its signature with seq 0: a training loop builds each once
_MAX_SIGNATURES = 4096


def _cached_signature(what: str, dtype, shape, root, op) -> np.ndarray:
    key = (what, dtype, shape, root, op)
    sig = _SIGNATURES.get(key)
    if sig is None:
        if len(_SIGNATURES) >= _MAX_SIGNATURES:
            _SIGNATURES.clear()
        sig = _SIGNATURES[key] = _signature(0, what, dtype, shape, root, op)
    return sig


def check(group, what: str, seq: int, dtype=None, shape=None, root=None, op=None, same_shape: bool = True,
          detail_only: bool = False) -> None:
    """Compare this call (collective number `seq` on `group`) with the other ranks'; raise DistError on a mismatch.

    `same_shape=False`: the ranks' sizes may differ (all_to_all); `detail_only`: checked only at DETAIL.
    """
    transport = group.check_transport
    if transport is None or (detail_only and not group.detail):
        return
    from ember.distributed.work import blocking_call, wait_requests

    sig = _cached_signature(what, dtype, tuple(shape) if same_shape and shape is not None else None, root, op)
    cols = _WIDTH if group.detail else _CHEAP
    both = np.empty(2 * cols, np.int64)
    both[:cols] = sig[:cols]
    both[1] = seq
    np.negative(both[:cols], out=both[cols:])
    where = (group, seq)
    blocking_call(transport, lambda: transport.allreduce_max(both), what, group.members, where)
    if not np.add(both[:cols], both[cols:]).any():  # max == -max(-x) == min in every column
        return
    mine = sig.copy()
    mine[1] = seq
    table = np.empty((transport.size, _WIDTH), np.int64)
    wait_requests(transport, transport.iallgather(mine, table), f"{what} (check)", group.members)
    rows = "; ".join(f"rank {group.global_rank(r)}: {_describe(table[r])}" for r in range(transport.size))
    raise DistError(f"{what} on rank {group.global_rank(transport.rank)}: the ranks of group {group.name} called "
                    f"mismatched collectives: {rows}")
