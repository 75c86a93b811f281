"""Collectives and point-to-point messages on Ember tensors (torch.distributed's names and semantics).

CPU tensors are used in place: MPI reads and writes their NumPy storage. With async_op=True a call
starts a nonblocking MPI operation and returns its `Work` handle; otherwise it waits for it (all_reduce
and broadcast run MPI's blocking call, which is faster on one host). A failed peer raises
DistBackendError naming it, or, during a blocking wait, is reported by the watchdog (work.py). Results land in the tensors given
(outputs, or the input for in-place ops such as all_reduce). Ranks outside `group` do nothing and
get None, as in PyTorch. Inside ember.jit or an ember.v1 graph, all_reduce and broadcast become
graph nodes (see ops.py).
"""

from __future__ import annotations

import pickle

import numpy as np

from ember.distributed import checks
from ember.distributed._buffers import Buffer, buffer, in_graph
from ember.distributed.errors import DistError
from ember.distributed.group import ProcessGroup, resolve, state
from ember.distributed.reduce_op import ReduceOp, as_reduce_op
from ember.distributed.transport import check_reduce_op
from ember.distributed.work import CompletedWork, Work, blocking_call


def _me(pg: ProcessGroup) -> int:
    return state.world.rank()


def _enter(pg: ProcessGroup, what: str, dtype=None, shape=None, root=None, op=None, same_shape: bool = True) -> int:
    """Count the collective on the group and compare it with the other ranks' (checks.py); its number."""
    seq = pg.enter()
    checks.check(pg, what, seq, dtype, shape, root, op, same_shape)
    return seq


def _start(what: str, pg: ProcessGroup, seq: int, reqs, finish, async_op: bool, result=None):
    """Wrap started requests in a Work; wait for it unless async_op."""
    work = Work(what, pg.transport, reqs, finish, result, members=pg.members, where=(pg, seq))
    if async_op:
        return work
    work.wait()
    return None


def _blocking(what: str, pg: ProcessGroup, seq: int, call, finish) -> None:
    """A collective the caller waits for, run as MPI's blocking call (see work.blocking_call)."""
    blocking_call(pg.transport, call, what, pg.members, (pg, seq))
    finish()


def _check_op(op, dtype, what, pg) -> ReduceOp:
    op = as_reduce_op(op, what)
    try:
        check_reduce_op(op, dtype, what)
    except ValueError as e:
        raise ValueError(str(e).replace(f"{what}:", f"{what} on rank {_me(pg)}:", 1)) from None
    return op


def _same(bufs, ref: Buffer, what: str, pg, arg: str) -> None:
    """Every tensor of a list must have the shape and dtype of `ref` (a local check: free)."""
    for i, b in enumerate(bufs):
        if b.array.shape != ref.array.shape or b.array.dtype != ref.array.dtype:
            raise ValueError(
                f"{what} on rank {_me(pg)}: {arg}[{i}] is {b.array.dtype.name} of shape {tuple(b.array.shape)}, "
                f"but the tensor is {ref.array.dtype.name} of shape {tuple(ref.array.shape)}")


def _list(xs, what: str, pg, arg: str, n: int) -> list:
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{what} on rank {_me(pg)}: {arg} must be a list of tensors, got {type(xs).__name__}")
    if len(xs) != n:
        raise ValueError(f"{what} on rank {_me(pg)}: {arg} has {len(xs)} tensors; it needs one per rank of the "
                         f"group ({n})")
    return list(xs)


def _root(pg: ProcessGroup, what: str, rank, group_rank, arg: str) -> int:
    """The group rank of a root given as a global rank (`arg`) or as `group_<arg>`."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"{what}: give {arg} or group_{arg}, not both")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{what}: group_{arg}={group_rank} is not a rank of group {pg.name} (size {pg.size()})")
        return group_rank
    if rank is None:
        raise ValueError(f"{what}: {arg} (a global rank) or group_{arg} must be given")
    return pg.group_rank(rank, what, arg)


def _avg(arr: np.ndarray, n: int) -> None:
    np.divide(arr, n, out=arr, casting="unsafe")


# --- reductions ---------------------------------------------------------------------------------------
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` over the ranks with `op`; every rank gets the result in `tensor`."""
    what = "all_reduce"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    if in_graph(tensor):
        from ember.distributed.ops import graph_all_reduce

        graph_all_reduce(tensor, as_reduce_op(op, what), pg)
        return CompletedWork(what, [tensor]) if async_op else None
    buf = buffer(tensor, what, "tensor", _me(pg), write=True)
    op = _check_op(op, buf.array.dtype, what, pg)
    seq = _enter(pg, what, buf.array.dtype, buf.array.shape, op=op)
    n = pg.size()

    def finish():
        if op is ReduceOp.AVG:
            _avg(buf.array, n)
        buf.done()

    if not async_op:
        return _blocking(what, pg, seq, lambda: pg.transport.allreduce(buf.array, op), finish)
    return _start(what, pg, seq, pg.transport.iallreduce(buf.array, op), finish, async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False, group_dst=None):
    """Reduce `tensor` over the ranks with `op` into `tensor` on rank `dst` (the others' are unchanged)."""
    what = "reduce"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    root = _root(pg, what, dst, group_dst, "dst")
    buf = buffer(tensor, what, "tensor", _me(pg), write=pg.rank() == root)
    op = _check_op(op, buf.array.dtype, what, pg)
    seq = _enter(pg, what, buf.array.dtype, buf.array.shape, root=root, op=op)
    mine = pg.rank() == root
    n = pg.size()

    def finish():
        if mine:
            if op is ReduceOp.AVG:
                _avg(buf.array, n)
            buf.done()

    return _start(what, pg, seq, pg.transport.ireduce(buf.array, root, op), finish, async_op, [tensor])


def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    """Copy `tensor` of rank `src` into `tensor` on every rank."""
    what = "broadcast"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    root = _root(pg, what, src, group_src, "src")
    if in_graph(tensor):
        from ember.distributed.ops import graph_broadcast

        graph_broadcast(tensor, root, pg)
        return CompletedWork(what, [tensor]) if async_op else None
    buf = buffer(tensor, what, "tensor", _me(pg), write=True)
    seq = _enter(pg, what, buf.array.dtype, buf.array.shape, root=root)
    receives = pg.rank() != root
    if not async_op:
        return _blocking(what, pg, seq, lambda: pg.transport.bcast(buf.array, root), lambda: buf.done(receives))
    return _start(what, pg, seq, pg.transport.ibcast(buf.array, root), lambda: buf.done(receives), async_op,
                  [tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input` (world size times `output`'s elements) over the ranks; rank i gets block i in `output`."""
    what = "reduce_scatter_tensor"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    out = buffer(output, what, "output", me, write=True)
    inp = buffer(input, what, "input", me, write=False)
    n = pg.size()
    if inp.array.size != n * out.array.size or inp.array.dtype != out.array.dtype:
        raise ValueError(
            f"{what} on rank {me}: input must hold world size ({n}) times output's elements with the same dtype; "
            f"got input {inp.array.dtype.name} {tuple(inp.array.shape)} and output {out.array.dtype.name} "
            f"{tuple(out.array.shape)}")
    op = _check_op(op, out.array.dtype, what, pg)
    seq = _enter(pg, what, out.array.dtype, out.array.shape, op=op)

    def finish():
        if op is ReduceOp.AVG:
            _avg(out.array, n)
        out.done()

    reqs = pg.transport.ireduce_scatter(inp.array, out.array, [out.array.size] * n, op)
    return _start(what, pg, seq, reqs, finish, async_op, [output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce the lists over the ranks; rank i gets the reduction of everyone's `input_list[i]` in `output`."""
    what = "reduce_scatter"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    out = buffer(output, what, "output", me, write=True)
    ins = [buffer(t, what, f"input_list[{i}]", me, write=False)
           for i, t in enumerate(_list(input_list, what, pg, "input_list", pg.size()))]
    _same(ins, out, what, pg, "input_list")
    op = _check_op(op, out.array.dtype, what, pg)
    seq = _enter(pg, what, out.array.dtype, out.array.shape, op=op)
    send = np.concatenate([b.array.reshape(-1) for b in ins]) if ins else np.empty(0, out.array.dtype)
    n = pg.size()

    def finish():
        if op is ReduceOp.AVG:
            _avg(out.array, n)
        out.done()

    reqs = pg.transport.ireduce_scatter(send, out.array, [out.array.size] * n, op)
    return _start(what, pg, seq, reqs, finish, async_op, [output])


# --- gathers and scatters ----------------------------------------------------------------------------
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's `input_tensor`, concatenated in rank order (along dim 0, or stacked) into `output_tensor`."""
    what = "all_gather_into_tensor"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    out = buffer(output_tensor, what, "output_tensor", me, write=True)
    inp = buffer(input_tensor, what, "input_tensor", me, write=False)
    n = pg.size()
    if out.array.size != n * inp.array.size or out.array.dtype != inp.array.dtype:
        raise ValueError(
            f"{what} on rank {me}: output_tensor must hold world size ({n}) times input_tensor's elements with the "
            f"same dtype; got output {out.array.dtype.name} {tuple(out.array.shape)} and input "
            f"{inp.array.dtype.name} {tuple(inp.array.shape)}")
    seq = _enter(pg, what, inp.array.dtype, inp.array.shape)
    return _start(what, pg, seq, pg.transport.iallgather(inp.array, out.array), out.done, async_op, [output_tensor])


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Every rank's `tensor`, into `tensor_list[rank]` on every rank."""
    what = "all_gather"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    inp = buffer(tensor, what, "tensor", me, write=False)
    outs = [buffer(t, what, f"tensor_list[{i}]", me, write=True)
            for i, t in enumerate(_list(tensor_list, what, pg, "tensor_list", pg.size()))]
    _same(outs, inp, what, pg, "tensor_list")
    seq = _enter(pg, what, inp.array.dtype, inp.array.shape)
    recv = np.empty((pg.size(),) + inp.array.shape, inp.array.dtype)

    def finish():
        for i, b in enumerate(outs):
            b.array[...] = recv[i]
            b.done()

    return _start(what, pg, seq, pg.transport.iallgather(inp.array, recv), finish, async_op, list(tensor_list))


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False, group_dst=None):
    """Every rank's `tensor`, into `gather_list[rank]` on rank `dst` (other ranks pass no list)."""
    what = "gather"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    root = _root(pg, what, dst, group_dst, "dst")
    inp = buffer(tensor, what, "tensor", me, write=False)
    mine = pg.rank() == root
    outs: list = []
    if mine:
        if gather_list is None:
            raise ValueError(f"{what} on rank {me}: gather_list must be given on the destination rank")
        outs = [buffer(t, what, f"gather_list[{i}]", me, write=True)
                for i, t in enumerate(_list(gather_list, what, pg, "gather_list", pg.size()))]
        _same(outs, inp, what, pg, "gather_list")
    elif gather_list:
        raise ValueError(f"{what} on rank {me}: gather_list must not be given on a rank other than dst ({dst})")
    seq = _enter(pg, what, inp.array.dtype, inp.array.shape, root=root)
    recv = np.empty((pg.size(),) + inp.array.shape, inp.array.dtype) if mine else None

    def finish():
        for i, b in enumerate(outs):
            b.array[...] = recv[i]
            b.done()

    return _start(what, pg, seq, pg.transport.igather(inp.array, recv, root), finish, async_op,
                  list(gather_list or []))


def scatter(tensor, scatter_list=None, src=None, group=None, async_op: bool = False, group_src=None):
    """`scatter_list[rank]` of rank `src` into `tensor` on every rank (other ranks pass no list)."""
    what = "scatter"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    root = _root(pg, what, src, group_src, "src")
    out = buffer(tensor, what, "tensor", me, write=True)
    send = None
    if pg.rank() == root:
        if scatter_list is None:
            raise ValueError(f"{what} on rank {me}: scatter_list must be given on the source rank")
        ins = [buffer(t, what, f"scatter_list[{i}]", me, write=False)
               for i, t in enumerate(_list(scatter_list, what, pg, "scatter_list", pg.size()))]
        _same(ins, out, what, pg, "scatter_list")
        send = np.stack([b.array for b in ins]) if ins else None
    elif scatter_list:
        raise ValueError(f"{what} on rank {me}: scatter_list must not be given on a rank other than src ({src})")
    seq = _enter(pg, what, out.array.dtype, out.array.shape, root=root)
    return _start(what, pg, seq, pg.transport.iscatter(send, out.array, root), out.done, async_op, [tensor])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """Rank i's `input_tensor_list[j]` lands in rank j's `output_tensor_list[i]` (sizes may differ per pair)."""
    what = "all_to_all"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    n = pg.size()
    ins = [buffer(t, what, f"input_tensor_list[{i}]", me, write=False)
           for i, t in enumerate(_list(input_tensor_list, what, pg, "input_tensor_list", n))]
    outs = [buffer(t, what, f"output_tensor_list[{i}]", me, write=True)
            for i, t in enumerate(_list(output_tensor_list, what, pg, "output_tensor_list", n))]
    dtypes = {b.array.dtype for b in ins + outs}
    if len(dtypes) > 1:
        raise ValueError(f"{what} on rank {me}: all tensors must have one dtype, got {sorted(d.name for d in dtypes)}")
    dtype = dtypes.pop()
    seq = _enter(pg, what, dtype, None, same_shape=False)
    send = np.concatenate([b.array.reshape(-1) for b in ins])
    rcounts = [b.array.size for b in outs]
    recv = np.empty(sum(rcounts), dtype)

    def finish():
        pos = 0
        for b, c in zip(outs, rcounts):
            b.array.reshape(-1)[...] = recv[pos:pos + c]
            pos += c
            b.done()

    reqs = pg.transport.ialltoallv(send, [b.array.size for b in ins], recv, rcounts)
    return _start(what, pg, seq, reqs, finish, async_op, list(output_tensor_list))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op: bool = False):
    """all_to_all on dim-0 slices of one tensor: input rows go out by `input_split_sizes` (default: even)."""
    what = "all_to_all_single"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    me = _me(pg)
    n = pg.size()
    out = buffer(output, what, "output", me, write=True)
    inp = buffer(input, what, "input", me, write=False)
    if out.array.dtype != inp.array.dtype:
        raise ValueError(f"{what} on rank {me}: output is {out.array.dtype.name} but input is {inp.array.dtype.name}")
    counts = []
    for b, splits, arg in ((inp, input_split_sizes, "input"), (out, output_split_sizes, "output")):
        rows = b.array.shape[0] if b.array.ndim else 1
        row = b.array.size // rows if rows else 0
        if not splits:
            if rows % n:
                raise ValueError(f"{what} on rank {me}: {arg} has {rows} rows, which do not split evenly over "
                                 f"{n} ranks; give {arg}_split_sizes")
            splits = [rows // n] * n
        if len(splits) != n or sum(splits) != rows:
            raise ValueError(f"{what} on rank {me}: {arg}_split_sizes {list(splits)} must have {n} entries adding "
                             f"up to {arg}'s {rows} rows")
        counts.append([int(s) * row for s in splits])
    seq = _enter(pg, what, out.array.dtype, None, same_shape=False)
    reqs = pg.transport.ialltoallv(inp.array, counts[0], out.array, counts[1])
    return _start(what, pg, seq, reqs, out.done, async_op, [output])


# --- synchronisation and objects -----------------------------------------------------------------------
def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group has reached the barrier."""
    what = "barrier"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    seq = _enter(pg, what)
    return _start(what, pg, seq, pg.transport.ibarrier(), None, async_op)


def _wait(what, pg, seq, reqs) -> None:
    Work(what, pg.transport, reqs, members=pg.members, where=(pg, seq)).wait()


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None) -> None:
    """The objects of rank `src`'s `object_list` replace the items of everyone's (pickled, as in PyTorch)."""
    what = "broadcast_object_list"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    if not isinstance(object_list, list):
        raise TypeError(f"{what} on rank {_me(pg)}: object_list must be a list, got {type(object_list).__name__}")
    root = _root(pg, what, src, group_src, "src")
    seq = _enter(pg, what, None, (len(object_list),), root=root)
    mine = pg.rank() == root
    blobs = [pickle.dumps(o) for o in object_list] if mine else []
    sizes = np.array([len(b) for b in blobs] if mine else [0] * len(object_list), np.int64)
    _wait(what, pg, seq, pg.transport.ibcast(sizes, root))
    data = np.frombuffer(b"".join(blobs), np.uint8).copy() if mine else np.empty(int(sizes.sum()), np.uint8)
    _wait(what, pg, seq, pg.transport.ibcast(data, root))
    if not mine:
        pos = 0
        for i, s in enumerate(sizes.tolist()):
            object_list[i] = pickle.loads(data[pos:pos + s].tobytes())
            pos += s
    return None


def all_gather_object(object_list, obj, group=None) -> None:
    """Every rank's `obj` (pickled), into `object_list[rank]` on every rank."""
    what = "all_gather_object"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    n = pg.size()
    _list(object_list, what, pg, "object_list", n)
    seq = _enter(pg, what)
    blob = np.frombuffer(pickle.dumps(obj), np.uint8).copy()
    sizes = np.empty(n, np.int64)
    _wait(what, pg, seq, pg.transport.iallgather(np.array([blob.size], np.int64), sizes))
    data = np.empty(int(sizes.sum()), np.uint8)
    _wait(what, pg, seq, pg.transport.iallgatherv(blob, data, sizes.tolist()))
    pos = 0
    for i, s in enumerate(sizes.tolist()):
        object_list[i] = pickle.loads(data[pos:pos + s].tobytes())
        pos += s
    return None


# --- point to point -------------------------------------------------------------------------------------
def _peer(pg, what, rank, group_rank, arg) -> int:
    peer = _root(pg, what, rank, group_rank, arg)
    if peer == pg.rank():
        raise ValueError(f"{what} on rank {_me(pg)}: {arg} {pg.global_rank(peer)} is this rank; a rank cannot "
                         "send to or receive from itself")
    return peer


def _tag(tag, what) -> int:
    if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < (1 << 20):
        raise ValueError(f"{what}: tag must be an int from 0 to {(1 << 20) - 1}, got {tag!r}")
    return tag


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> Work | None:
    """Start sending `tensor` to rank `dst`; returns the Work."""
    what = "isend"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    peer = _peer(pg, what, dst, group_dst, "dst")
    buf = buffer(tensor, what, "tensor", _me(pg), write=False)
    work = Work(what, pg.transport, pg.transport.isend(buf.array, peer, _tag(tag, what)), members={pg.ranks[peer]})
    work._keep = buf  # the array must live until MPI has sent it
    return work


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    """Send `tensor` to rank `dst` (returns once MPI no longer needs the tensor's memory)."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


class RecvWork(Work):
    """The Work of irecv: after wait(), `source_rank()` is the sender's (global) rank."""

    def __init__(self, what, pg, buf, source, tag) -> None:
        self._pg = pg
        self._buf = buf
        self._source = None
        transport = pg.transport
        self._status = transport.MPI.Status() if transport.kind == "mpi" else None
        reqs = transport.irecv(buf.array, source, tag)
        members = pg.members if source is None else {pg.ranks[source]}
        super().__init__(what, _StatusTransport(transport, self._status), reqs, self._received, [buf.tensor], members)

    def _received(self) -> None:
        st = self._status
        src = st.Get_source()
        self._source = self._pg.global_rank(src)
        got = st.Get_count(self._pg.transport.MPI.BYTE)
        arr = self._buf.array
        if got != arr.nbytes:
            raise DistError(
                f"{self.what} on rank {_me(self._pg)}: rank {self._source} sent {got} bytes, but the tensor "
                f"({arr.dtype.name}, shape {tuple(arr.shape)}) holds {arr.nbytes}; the shapes or dtypes of the "
                "send and the recv differ")
        self._buf.done()

    def source_rank(self) -> int:
        """The global rank the message came from."""
        self.wait()
        return self._source

    _source_rank = source_rank  # PyTorch's private spelling


class _StatusTransport:
    """Tests one receive request keeping its status (to learn the sender and the size)."""

    def __init__(self, transport, status) -> None:
        self._transport = transport
        self._status = status
        self.rank = transport.rank

    def test_all(self, reqs) -> bool:
        return reqs[0].Test(self._status)

    def wait_all(self, reqs) -> None:
        reqs[0].Wait(self._status)


def irecv(tensor, src=None, group=None, tag: int | None = 0, group_src=None) -> RecvWork | None:
    """Start receiving into `tensor` from rank `src` (None: any rank); returns the Work."""
    what = "irecv"
    pg = resolve(group, what)
    if not pg.is_member:
        return None
    source = None if src is None and group_src is None else _peer(pg, what, src, group_src, "src")
    if pg.size() == 1:
        raise ValueError(f"{what} on rank {_me(pg)}: a world of one has nobody to receive from")
    buf = buffer(tensor, what, "tensor", _me(pg), write=True)
    return RecvWork(what, pg, buf, source, None if tag is None else _tag(tag, what))


def recv(tensor, src=None, group=None, tag: int | None = 0, group_src=None) -> int:
    """Receive into `tensor` from rank `src` (None: any rank); returns the sender's rank (-1 outside the group)."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    return work.source_rank()


__all__ = [
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single",
    "barrier", "broadcast", "broadcast_object_list", "gather", "irecv", "isend", "recv", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "send",
]
