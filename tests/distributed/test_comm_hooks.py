"""DDP communication hooks (register_comm_hook; fp16/bf16 compression) on 2 ranks (programs/comm_hooks.py),
and ember.futures.Future in one process."""

import pytest

import ember as em
from ember.futures import Future, collect_all, wait_all
from tests.distributed.launch import check, requires_mpi, run


@requires_mpi
def test_comm_hooks_give_the_emulated_and_pytorchs_gradients_eager_and_jitted():
    out = check(run(2, "comm_hooks.py", timeout=300))
    for r in (0, 1):
        for hook in ("allreduce_hook", "fp16_compress_hook", "fp16_compress_wrapper"):
            assert f"rank {r}: {hook} eager == emulation and torch" in out, out
        assert f"rank {r}: bf16_compress_hook eager == emulation" in out
        assert f"rank {r}: fp16_compress_hook jitted == emulation and torch" in out
        assert f"rank {r}: bf16_compress_hook jitted == emulation" in out
        assert f"rank {r}: hook errors" in out


def test_future_values_chain_and_errors():
    fut = Future()
    assert not fut.done()
    doubled = fut.then(lambda f: f.value() * 2)
    seen = []
    fut.add_done_callback(lambda f: seen.append(f.value()))
    fut.set_result(em.tensor([1.0, 2.0]))
    assert fut.done() and seen and doubled.wait().tolist() == [2.0, 4.0]
    assert [v.tolist() for v in wait_all([fut, doubled])] == [[1.0, 2.0], [2.0, 4.0]]
    assert [f.value().tolist() for f in collect_all([fut, doubled]).wait()] == [[1.0, 2.0], [2.0, 4.0]]
    with pytest.raises(RuntimeError, match="already has a value"):
        fut.set_result(1)
    failing = fut.then(lambda f: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.wait()
    with pytest.raises(RuntimeError, match="no result was set"):
        Future().wait()
    bad = Future()
    bad.set_exception(ValueError("no data"))
    with pytest.raises(ValueError, match="no data"):
        bad.value()


def test_a_work_gives_a_future_of_its_tensors_in_a_world_of_one():
    import ember.distributed as dist

    dist.init_process_group()
    try:
        t = em.tensor([3.0])
        fut = dist.all_reduce(t, async_op=True).get_future()
        assert fut.then(lambda f: f.value()[0] + 1).wait().tolist() == [4.0]
    finally:
        dist.destroy_process_group()
