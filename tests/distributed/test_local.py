"""ember.distributed in a process started without a launcher: a world of one, with PyTorch's API and errors."""

import numpy as np
import pytest

import ember as em
import ember.distributed as dist
from ember.distributed import ReduceOp


@pytest.fixture
def world():
    dist.init_process_group()
    yield
    dist.destroy_process_group()


def test_before_init_the_api_says_to_call_init_process_group():
    assert not dist.is_initialized() and dist.is_available()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="all_reduce: Default process group has not been initialized"):
        dist.all_reduce(em.ones(2))


def test_a_world_of_one_runs_every_collective(world):
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "mpi")
    t = em.tensor([1.0, 2.0])
    dist.all_reduce(t)
    dist.all_reduce(t, op=ReduceOp.AVG)
    dist.broadcast(t, src=0)
    dist.reduce(t, dst=0)
    assert t.tolist() == [1.0, 2.0]
    out = [em.zeros(2)]
    dist.all_gather(out, t)
    assert out[0].tolist() == [1.0, 2.0]
    big = em.zeros(2)
    assert dist.all_gather_into_tensor(big, t, async_op=True).wait()
    assert big.tolist() == [1.0, 2.0]
    r = em.zeros(2)
    dist.reduce_scatter_tensor(r, em.tensor([3.0, 4.0]))
    assert r.tolist() == [3.0, 4.0]
    objs = [None]
    dist.broadcast_object_list(objs, src=0)
    got = [None]
    dist.all_gather_object(got, {"a": 1})
    assert got == [{"a": 1}]
    dist.barrier()
    sub = dist.new_group([0])
    dist.all_reduce(t, group=sub)
    assert dist.get_process_group_ranks(sub) == [0] and dist.group.WORLD is not None


def test_async_work_handles_follow_pytorch(world):
    w = dist.all_reduce(em.ones(3), async_op=True)
    assert w.is_completed() and w.wait() is True and w.is_success() and w.exception() is None
    assert len(w.result()) == 1


def test_initialising_twice_or_with_a_bigger_world_is_an_error():
    with pytest.raises(RuntimeError, match="not started by an MPI launcher.*ember run -n N"):
        dist.init_process_group(world_size=4, rank=0)
    dist.init_process_group(backend="gloo")  # PyTorch's backend names run on MPI too
    try:
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group()
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="unknown backend 'tcp'"):
        dist.init_process_group(backend="tcp")


def test_bad_arguments_name_the_op_and_the_rank(world):
    with pytest.raises(ValueError, match="all_reduce on rank 0: tensor must be contiguous"):
        dist.all_reduce(em.zeros((3, 3)).t())
    with pytest.raises(TypeError, match="all_reduce on rank 0: tensor must be a Tensor, got ndarray"):
        dist.all_reduce(np.zeros(3))
    with pytest.raises(ValueError, match="AVG needs a floating-point tensor, got int32"):
        dist.all_reduce(em.zeros(3, dtype=em.int32), op="avg")
    with pytest.raises(ValueError, match="op must be a ReduceOp"):
        dist.all_reduce(em.zeros(3), op="mean")
    with pytest.raises(ValueError, match="send on rank 0: dst 0 is this rank"):
        dist.send(em.zeros(3), dst=0)
    with pytest.raises(ValueError, match="broadcast: src=1 is not a rank of group WORLD"):
        dist.broadcast(em.zeros(3), src=1)
    with pytest.raises(ValueError, match="broadcast: src \\(a global rank\\) or group_src must be given"):
        dist.broadcast(em.zeros(3))
    with pytest.raises(ValueError, match="new_group: rank 3 is not a rank of the world"):
        dist.new_group([0, 3])
    with pytest.raises(ValueError, match="meta device"):
        dist.all_reduce(em.zeros(3, device="meta"))
    with pytest.raises(ValueError, match="scatter on rank 0: scatter_list must be given on the source rank"):
        dist.scatter(em.zeros(2), None, src=0)


def test_differentiable_all_reduce_in_a_world_of_one(world):
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = dist.nn.functional.all_reduce(x * 3)
    y.sum().backward()
    assert y.tolist() == [3.0, 6.0] and x.grad.tolist() == [3.0, 3.0]


def test_checkpoint_helpers_and_ddp_in_a_world_of_one(world, tmp_path):
    from ember.distributed.checkpoint import is_main_process, load_on_main, save_on_main

    em.manual_seed(0)
    net = em.nn.Linear(3, 2)
    ddp = dist.DistributedDataParallel(net)
    ddp(em.ones((4, 3))).sum().backward()
    assert net.weight.grad.tolist() == [[4.0] * 3] * 2 and list(ddp.state_dict())[0].startswith("module.")
    assert is_main_process()
    save_on_main({"w": net.weight.detach(), "epoch": 3}, tmp_path / "c.safetensors")
    state = load_on_main(tmp_path / "c.safetensors")
    assert state["epoch"] == 3 and state["w"].tolist() == net.weight.tolist()
    with pytest.raises(FileNotFoundError):
        load_on_main(tmp_path / "missing.safetensors")


def test_pytorchs_import_paths_name_the_same_classes():
    import ember.nn as nn
    from ember.nn.parallel import DistributedDataParallel

    assert DistributedDataParallel is dist.DistributedDataParallel
    assert nn.parallel.DistributedDataParallel is dist.DistributedDataParallel
    assert nn.SyncBatchNorm is dist.SyncBatchNorm
    net = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)))
    assert type(net[1]) is nn.SyncBatchNorm
    with pytest.raises(AttributeError, match="no attribute 'DataParalel'"):
        nn.parallel.DataParalel  # noqa: B018
