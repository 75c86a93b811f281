"""The engine underneath a process group, on NumPy arrays: MPI (mpi4py) or, for a lone process, itself.

Every operation is nonblocking and returns request objects with `Test()`; the caller waits on them
(see `work.py`), so a wait can notice a failed peer. Buffers are the arrays themselves: MPI reads and
writes their memory, nothing is copied. float16 and bfloat16 travel as 16-bit words and are reduced by
user-defined MPI ops (MPI has no portable type for them); bool uses C_BOOL with logical ops.
"""

from __future__ import annotations

import numpy as np

from ember.distributed.reduce_op import ReduceOp


def _half(dtype: np.dtype) -> bool:
    """Whether `dtype` is float16 or ml_dtypes' bfloat16 (by name: importing ml_dtypes takes 0.7 s, which every
    `ember` command paid when its parser was built)."""
    return dtype == np.float16 or (dtype.kind == "V" and dtype.name == "bfloat16")


def reduce_kind(dtype) -> str:
    """'bool', 'float' or 'int': which ReduceOps a dtype allows (see `check_reduce_op`)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    if _half(dtype) or dtype.kind in "fc":
        return "float"
    return "int"


_ALLOWED: set = set()  # (op, dtype) pairs already checked: a collective in a training loop checks once


def check_reduce_op(op: ReduceOp, dtype, what: str) -> None:
    """A ValueError naming `what` when `op` is not defined on `dtype` (bitwise ops on floats, AVG on integers)."""
    if (op, dtype) in _ALLOWED:
        return
    kind = reduce_kind(dtype)
    name = np.dtype(dtype).name
    if kind == "float" and op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        raise ValueError(f"{what}: {op!r} is a bitwise op; it is not defined for {name} tensors")
    if kind != "float" and op is ReduceOp.AVG:
        raise ValueError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {name} (use SUM and divide)")
    _ALLOWED.add((op, dtype))


class _Done:
    """A request that completed when it was made (a lone process has nobody to wait for)."""

    __slots__ = ()

    def Test(self, status=None) -> bool:  # noqa: N802 - mpi4py's name
        return True

    def Cancel(self) -> None:  # noqa: N802
        pass


DONE = _Done()


class SelfTransport:
    """World size 1 without MPI: every collective is a copy (or nothing) on this process's own data."""

    kind = "self"
    rank = 0
    size = 1

    def dup(self) -> SelfTransport:
        return SelfTransport()

    def free(self) -> None:
        pass

    def test_all(self, reqs) -> bool:
        return True

    def wait_all(self, reqs) -> None:
        pass

    def iallreduce(self, buf, op):
        return [DONE]

    def allreduce(self, buf, op) -> None:
        pass

    def bcast(self, buf, root) -> None:
        pass

    def ireduce(self, buf, root, op):
        return [DONE]

    def ibcast(self, buf, root):
        return [DONE]

    def _copy(self, send, recv):
        if recv is not None and send is not None:
            recv.reshape(-1)[...] = send.reshape(-1)
        return [DONE]

    def iallgather(self, send, recv):
        return self._copy(send, recv)

    def iallgatherv(self, send, recv, counts):
        return self._copy(send, recv)

    def ireduce_scatter(self, send, recv, counts, op):
        return self._copy(send, recv)

    def igather(self, send, recv, root):
        return self._copy(send, recv)

    def iscatter(self, send, recv, root):
        return self._copy(send, recv)

    def ialltoallv(self, send, scounts, recv, rcounts):
        return self._copy(send, recv)

    def ibarrier(self):
        return [DONE]


class MPITransport:
    """An mpi4py communicator seen through the operations process groups need."""

    kind = "mpi"

    def __init__(self, comm, MPI) -> None:  # noqa: N803
        self.comm = comm
        self.MPI = MPI
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._ops: dict = {}  # (ReduceOp, dtype) -> MPI.Op

    def dup(self) -> MPITransport:
        """A transport on a duplicate communicator: its messages never match this one's."""
        return MPITransport(self.dup_comm(), self.MPI)

    def dup_comm(self):
        """A duplicate of the communicator, waited for like a collective (a failed or departed peer raises)."""
        from ember.distributed.work import wait_requests

        comm, req = self.comm.Idup()
        wait_requests(self, [req], "creating a communicator")
        return comm

    def free(self) -> None:
        if self.comm not in (self.MPI.COMM_WORLD, self.MPI.COMM_SELF) and self.comm != self.MPI.COMM_NULL:
            self.comm.Free()

    def test_all(self, reqs) -> bool:
        return self.MPI.Request.Testall(reqs)

    def wait_all(self, reqs) -> None:
        self.MPI.Request.Waitall(reqs)

    # --- buffers and ops --------------------------------------------------------------------------
    def _t(self, arr, counts=None):
        """The mpi4py buffer spec of a contiguous array: [array, (counts, displacements,) datatype]."""
        MPI = self.MPI
        dt = arr.dtype
        if _half(dt):
            arr, mtype = arr.view(np.uint16), MPI.UINT16_T
        elif dt == np.bool_:
            mtype = MPI.C_BOOL
        else:
            mtype = _datatype(MPI, dt)
        if counts is None:
            return [arr, mtype]
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
        return [arr, list(map(int, counts)), displs, mtype]

    def _op(self, op: ReduceOp, dtype):
        key = (op, dtype)
        found = self._ops.get(key)
        if found is None:
            found = self._ops[key] = self._make_op(op, dtype)
        return found

    def _make_op(self, op: ReduceOp, dtype):
        MPI = self.MPI
        dtype = np.dtype(dtype)
        if _half(dtype):
            return _half_op(MPI, dtype, op)
        if dtype == np.bool_:
            logical = {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.BOR: MPI.LOR, ReduceOp.MIN: MPI.LAND,
                       ReduceOp.PRODUCT: MPI.LAND, ReduceOp.BAND: MPI.LAND, ReduceOp.BXOR: MPI.LXOR}
            return logical[op]
        table = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
                 ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}
        return table[op]

    # --- collectives (the caller checked the arguments) ----------------------------------------------
    def iallreduce(self, buf, op):
        return [self.comm.Iallreduce(self.MPI.IN_PLACE, self._t(buf), self._op(op, buf.dtype))]

    # Blocking forms for calls that wait anyway: MPICH's blocking collectives use faster algorithms on
    # one host than their nonblocking schedules (about 10% at 1-4 MiB here).
    def allreduce(self, buf, op) -> None:
        self.comm.Allreduce(self.MPI.IN_PLACE, self._t(buf), self._op(op, buf.dtype))

    def bcast(self, buf, root) -> None:
        self.comm.Bcast(self._t(buf), root)

    def allreduce_max(self, buf) -> None:
        """The elementwise maximum over the ranks, in place (the collectives' checks: a few int64s)."""
        self.comm.Allreduce(self.MPI.IN_PLACE, [buf, self.MPI.INT64_T], self.MPI.MAX)

    def ireduce(self, buf, root, op):
        if self.rank == root:
            return [self.comm.Ireduce(self.MPI.IN_PLACE, self._t(buf), self._op(op, buf.dtype), root)]
        return [self.comm.Ireduce(self._t(buf), None, self._op(op, buf.dtype), root)]

    def ibcast(self, buf, root):
        return [self.comm.Ibcast(self._t(buf), root)]

    def iallgather(self, send, recv):
        return [self.comm.Iallgather(self._t(send), self._t(recv))]

    def iallgatherv(self, send, recv, counts):
        return [self.comm.Iallgatherv(self._t(send), self._t(recv, counts))]

    def ireduce_scatter(self, send, recv, counts, op):
        return [self.comm.Ireduce_scatter(self._t(send), self._t(recv), list(map(int, counts)), self._op(op, send.dtype))]

    def igather(self, send, recv, root):
        return [self.comm.Igather(self._t(send), self._t(recv) if self.rank == root else None, root)]

    def iscatter(self, send, recv, root):
        return [self.comm.Iscatter(self._t(send) if self.rank == root else None, self._t(recv), root)]

    def ialltoallv(self, send, scounts, recv, rcounts):
        return [self.comm.Ialltoallv(self._t(send, scounts), self._t(recv, rcounts))]

    def ibarrier(self):
        return [self.comm.Ibarrier()]

    # --- point to point ----------------------------------------------------------------------------
    def isend(self, buf, dest: int, tag: int):
        return [self.comm.Isend(self._t(buf), dest, tag)]

    def irecv(self, buf, source: int | None, tag: int | None):
        MPI = self.MPI
        return [self.comm.Irecv(self._t(buf), MPI.ANY_SOURCE if source is None else source,
                                MPI.ANY_TAG if tag is None else tag)]


_DATATYPES: dict = {}


def _datatype(MPI, dtype):  # noqa: N803
    mtype = _DATATYPES.get(dtype)
    if mtype is None:
        mtype = _DATATYPES[dtype] = MPI.Datatype.fromcode(dtype.char)
    return mtype


_HALF_OPS: dict = {}


def _half_op(MPI, dtype, op: ReduceOp):  # noqa: N803
    """A user-defined MPI op combining 16-bit words as float16/bfloat16 (each step rounds, as the dtype does)."""
    key = (dtype, op)
    mop = _HALF_OPS.get(key)
    if mop is None:
        ufunc = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
                 ReduceOp.MAX: np.maximum}[op]

        def combine(inbuf, inoutbuf, datatype):
            a = np.frombuffer(inbuf, dtype=dtype)
            b = np.frombuffer(inoutbuf, dtype=dtype)
            ufunc(a, b, out=b)

        mop = _HALF_OPS[key] = MPI.Op.Create(combine, commute=True)
    return mop
