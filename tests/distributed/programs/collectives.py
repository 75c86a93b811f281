"""Every collective against NumPy on every dtype, odd and empty sizes, sync and async; then the errors.

Run on 2 and 3 ranks. Each rank's data is a function of (rank, size, seed) that every rank can
compute, so each rank checks its own result against the NumPy answer. Values are small integers, so
sums and products are exact in every dtype and in any reduction order.
"""

import sys

import numpy as np

import ember as em
import ember.distributed as dist
from ember import config
from ember.distributed import ReduceOp

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SIZES = [0, 1, 7, 1003]


def npdt(dtype):
    return getattr(em, dtype).np


def mk(arr, dtype):
    return em.tensor(np.array(arr, dtype=npdt(dtype)), dtype=getattr(em, dtype))


def rank_data(r, n, dtype, seed=0):
    """Rank r's data: small integers (0..3), as `dtype`."""
    vals = (np.arange(n) * 7 + r * 3 + seed * 5) % 4
    if dtype == "bool":
        return (vals % 2).astype(bool)
    return vals.astype(npdt(dtype))


def eq(got, want, dtype, what, rtol=0):
    got = got.numpy() if isinstance(got, em.Tensor) else got
    assert got.dtype == np.dtype(npdt(dtype)), (what, dtype, got.dtype)
    assert got.shape == want.shape, (what, dtype, got.shape, want.shape)
    if rtol:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, err_msg=f"{what} {dtype}")
    else:
        np.testing.assert_array_equal(got.astype(np.float64), np.asarray(want).astype(np.float64),
                                      err_msg=f"{what} {dtype}")


def expected_reduce(stack, op, dtype):
    if dtype == "bool":
        return {"sum": stack.any(0), "max": stack.any(0), "min": stack.all(0), "product": stack.all(0)}[op]
    f = stack.astype(np.float64)
    out = {"sum": f.sum(0), "max": f.max(0), "min": f.min(0), "product": f.prod(0), "avg": f.mean(0)}[op]
    return out.astype(npdt(dtype))


def main():
    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and dist.get_backend() == "mpi"
    checks = 0
    for dtype in DTYPES:
        float_ = dtype.startswith(("float", "bfloat"))
        tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 1e-7)
        for size in SIZES:
            every = np.stack([rank_data(k, size, dtype) for k in range(n)])
            ops = ["sum", "max", "min", "product"] + (["avg"] if float_ else [])
            for op in ops:
                for async_op in (False, True):
                    t = mk(rank_data(r, size, dtype) if op != "product" else (rank_data(r, size, dtype) % 2 + 1), dtype)
                    src = every if op != "product" else np.stack([rank_data(k, size, dtype) % 2 + 1 for k in range(n)])
                    work = dist.all_reduce(t, op=getattr(ReduceOp, op.upper()), async_op=async_op)
                    if async_op:
                        while not work.is_completed():
                            pass
                        work.wait()
                    eq(t, expected_reduce(src, op, dtype), dtype, f"all_reduce {op} {size}", tol if op == "avg" else 0)
                    checks += 1
            # broadcast from the last rank, reduce to rank 0
            t = mk(rank_data(r, size, dtype), dtype)
            dist.broadcast(t, src=n - 1)
            eq(t, every[n - 1], dtype, "broadcast")
            t = mk(rank_data(r, size, dtype), dtype)
            dist.reduce(t, dst=0, op=ReduceOp.SUM if dtype != "bool" else ReduceOp.MAX)
            eq(t, expected_reduce(every, "sum", dtype) if r == 0 else every[r], dtype, "reduce")
            # gathers
            outs = [mk(np.zeros(size), dtype) for _ in range(n)]
            dist.all_gather(outs, mk(every[r], dtype))
            for k in range(n):
                eq(outs[k], every[k], dtype, "all_gather")
            out = mk(np.zeros(n * size), dtype)
            dist.all_gather_into_tensor(out, mk(every[r], dtype), async_op=True).wait()
            eq(out, every.reshape(-1), dtype, "all_gather_into_tensor")
            out = mk(np.zeros((n, size)), dtype)
            dist.all_gather_into_tensor(out, mk(every[r], dtype))
            eq(out, every, dtype, "all_gather_into_tensor stacked")
            gl = [mk(np.zeros(size), dtype) for _ in range(n)] if r == 1 % n else None
            dist.gather(mk(every[r], dtype), gl, dst=1 % n)
            if gl is not None:
                for k in range(n):
                    eq(gl[k], every[k], dtype, "gather")
            # scatter from rank 0: block k of a (n, size) table
            table = np.stack([rank_data(k, size, dtype, seed=1) for k in range(n)])
            t = mk(np.zeros(size), dtype)
            dist.scatter(t, [mk(table[k], dtype) for k in range(n)] if r == 0 else None, src=0)
            eq(t, table[r], dtype, "scatter")
            # reduce_scatter: rank k gets the sum of everyone's block k
            if dtype != "bool":
                blocks = [np.stack([rank_data(k, size, dtype, seed=j) for j in range(n)]) for k in range(n)]
                t = mk(np.zeros(size), dtype)
                dist.reduce_scatter(t, [mk(blocks[r][j], dtype) for j in range(n)])
                eq(t, expected_reduce(np.stack([blocks[k][r] for k in range(n)]), "sum", dtype), dtype, "reduce_scatter")
                t = mk(np.zeros(size), dtype)
                dist.reduce_scatter_tensor(t, mk(blocks[r].reshape(-1), dtype))
                eq(t, expected_reduce(np.stack([blocks[k][r] for k in range(n)]), "sum", dtype), dtype,
                   "reduce_scatter_tensor")
            # all_to_all with sizes that differ per pair: rank i sends (i + j + size) % 3 elements to rank j
            def piece(i, j):
                return rank_data(i * n + j, (i + j + size) % 3, dtype)

            outs = [mk(np.zeros((j + r + size) % 3), dtype) for j in range(n)]
            dist.all_to_all(outs, [mk(piece(r, j), dtype) for j in range(n)])
            for j in range(n):
                eq(outs[j], piece(j, r), dtype, "all_to_all")
            # all_to_all_single, even split of 2 rows per rank
            inp = np.stack([rank_data(r * n + j, 2 * size, dtype) for j in range(n)]).reshape(n * 2, size)
            out = mk(np.zeros((n * 2, size)), dtype)
            dist.all_to_all_single(out, mk(inp, dtype))
            want = np.concatenate([np.stack([rank_data(i * n + r, 2 * size, dtype)]).reshape(2, size) for i in range(n)])
            eq(out, want, dtype, "all_to_all_single")
            # point to point around the ring
            nxt, prv = (r + 1) % n, (r - 1) % n
            got = mk(np.zeros(size), dtype)
            sw = dist.isend(mk(every[r], dtype), dst=nxt, tag=size)
            rw = dist.irecv(got, src=prv, tag=size)
            sw.wait()
            rw.wait()
            assert rw.source_rank() == prv
            eq(got, every[prv], dtype, "isend/irecv")
            checks += 12
    # blocking send/recv from any source
    if r == 0:
        for _ in range(n - 1):
            t = em.zeros(3)
            sender = dist.recv(t)
            assert t.tolist() == [float(sender)] * 3, (sender, t)
    else:
        dist.send(em.full((3,), float(r)), dst=0)
    # objects
    objs = [{"rank": r}, [r] * 2, None]
    dist.broadcast_object_list(objs, src=n - 1)
    assert objs == [{"rank": n - 1}, [n - 1] * 2, None], objs
    got = [None] * n
    dist.all_gather_object(got, ("r", r))
    assert got == [("r", k) for k in range(n)]
    # a subgroup: members reduce among themselves, the others do nothing
    sub = dist.new_group([0, n - 1])
    t = em.tensor([float(r + 1)])
    res = dist.all_reduce(t, group=sub)
    if r in (0, n - 1):
        assert t.item() == 1.0 + n and dist.get_rank(sub) == (0 if r == 0 else 1), t
    else:
        assert res is None and t.item() == r + 1 and dist.get_rank(sub) == -1
    assert dist.get_process_group_ranks(sub) == [0, n - 1]
    dist.barrier()
    errors(r, n)
    mismatches(r, n)
    dist.destroy_process_group()
    assert not dist.is_initialized()
    print(f"rank {r}: {checks} collective checks passed", flush=True)


def expect(exc, fragments, fn):
    try:
        fn()
    except exc as e:
        for frag in fragments:
            assert frag in str(e), (frag, str(e))
        return e
    raise AssertionError(f"expected {exc.__name__} with {fragments}")


def errors(r, n):
    """Bad input: a clear error naming the op and the rank, raised before any rank waits."""
    x = em.zeros((4, 4))[:, 1]
    expect(ValueError, ["all_reduce on rank", "contiguous"], lambda: dist.all_reduce(x))
    expect(ValueError, ["all_reduce on rank", "AVG needs a floating-point"],
           lambda: dist.all_reduce(em.zeros(3, dtype=em.int64), op=ReduceOp.AVG))
    expect(ValueError, ["all_reduce on rank", "bitwise"], lambda: dist.all_reduce(em.zeros(3), op=ReduceOp.BAND))
    expect(ValueError, ["all_gather on rank", "one per rank"], lambda: dist.all_gather([em.zeros(2)], em.zeros(2)))
    expect(ValueError, ["all_gather on rank", "tensor_list[0]"],
           lambda: dist.all_gather([em.zeros(3)] * n, em.zeros(2)))
    expect(ValueError, ["send on rank", "is this rank"], lambda: dist.send(em.zeros(2), dst=r))
    expect(ValueError, ["broadcast", "not a rank"], lambda: dist.broadcast(em.zeros(2), src=n))
    expect(ValueError, ["all_gather_into_tensor on rank", "world size"],
           lambda: dist.all_gather_into_tensor(em.zeros(3), em.zeros(2)))
    # a recv whose tensor is larger than what was sent: the receiver says so (cheap: MPI knows the size)
    if r == 0:
        dist.send(em.zeros(3), dst=1)
    elif r == 1:
        e = expect(dist.DistError, ["recv on rank 1", "rank 0 sent 12 bytes", "holds 16"],
                   lambda: dist.recv(em.zeros(4), src=0))
        assert isinstance(e, RuntimeError)
    dist.barrier()


def mismatches(r, n):
    """Mismatched collectives fail on every rank, naming each rank's call (never MPI's abort or mixed data).

    Sizes, dtypes and ops are compared always; shapes with the same size only at EMBER_DISTRIBUTED_DEBUG=DETAIL.
    The group stays usable: the check runs before any data moves.
    """
    dist.destroy_process_group()
    for level in ("INFO", "DETAIL"):
        config.set("distributed_debug", level.lower())
        dist.init_process_group()
        t = em.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [float(n)] * 3
        expect(dist.DistError, ["all_reduce on rank", "mismatched", "rank 0: all_reduce #2 float32 shape (3,)",
                                "rank 1: all_reduce #2 float32 shape (5,)"],
               lambda: dist.all_reduce(em.ones(3 if r == 0 else 5)))
        expect(dist.DistError, ["mismatched", "rank 0: all_reduce #3 float32 shape (3,)",
                                "rank 1: all_reduce #3 float64 shape (3,)"],
               lambda: dist.all_reduce(em.ones(3, dtype=em.float32 if r == 0 else em.float64)))
        expect(dist.DistError, ["mismatched", "rank 0: all_reduce #4", "rank 1: broadcast #4"],
               lambda: dist.all_reduce(em.ones(2)) if r == 0 else dist.broadcast(em.ones(2), src=0))
        expect(dist.DistError, ["mismatched", "rank 0: all_gather_into_tensor #5 float32 shape (2,)",
                                "rank 1: all_gather_into_tensor #5 float32 shape (1,)"],
               lambda: dist.all_gather_into_tensor(em.zeros(n * (2 if r == 0 else 1)), em.ones(2 if r == 0 else 1)))
        swapped = em.ones((2, 3) if r == 0 else (3, 2))
        if level == "DETAIL":
            expect(dist.DistError, ["rank 0: all_reduce #6 float32 shape (2, 3)", "rank 1: all_reduce #6 float32 "
                                    "shape (3, 2)"], lambda: dist.all_reduce(swapped))
        else:  # the same number of elements: PyTorch's default mode runs it too
            dist.all_reduce(swapped)
            assert swapped.sum().item() == 6.0 * n
        t = em.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [float(n)] * 3
        dist.destroy_process_group()
    config.reset("distributed_debug")
    dist.init_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
