"""DistributedDataParallel on 2 ranks equals single-process training on the whole batch (programs/ddp.py)."""

import numpy as np
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler as TorchSampler

import ember as em
from ember.distributed import DistributedSampler, SyncBatchNorm
from tests.distributed.launch import check, requires_mpi, run


@requires_mpi
def test_ddp_equals_single_process_training_jitted_and_eager():
    out = check(run(2, "ddp.py", timeout=400))
    for r in (0, 1):
        for norm in ("None", "bn", "sync"):
            for opt in ("sgd", "adam"):
                for accum in (1, 2):
                    assert f"rank {r}: ddp == single process: norm={norm} opt={opt} accum={accum}" in out
        for what in ("norm=None parallel=False opt=sgd", "norm=sync parallel=False opt=sgd",
                     "norm=None parallel=True opt=sgd", "norm=None parallel=False opt=plain_sgd"):
            assert f"rank {r}: jitted ddp == eager ddp: {what}" in out
        assert f"rank {r}: unused parameters" in out and f"rank {r}: sampler" in out


@pytest.mark.parametrize("n, drop_last", [(10, False), (10, True), (11, False), (11, True), (2, False)])
def test_sampler_without_shuffle_gives_torchs_indices(n, drop_last):
    data = list(range(n))
    for rank in range(3):
        ours = DistributedSampler(data, num_replicas=3, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(data, num_replicas=3, rank=rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_sampler_shuffles_by_seed_and_epoch():
    a = DistributedSampler(range(20), num_replicas=2, rank=0, seed=1)
    b = DistributedSampler(range(20), num_replicas=2, rank=0, seed=1)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


def test_convert_sync_batchnorm_keeps_parameters_and_buffers_and_is_batchnorm_in_a_world_of_one():
    em.manual_seed(0)
    bn = em.nn.BatchNorm1d(4)
    with em.no_grad():
        bn.weight.mul_(2.0)
        bn.running_mean.add_(0.5)
    x = em.randn(5, 4)
    bn(x)  # one training step: running statistics and the batch count move
    net = em.nn.Sequential(em.nn.Identity(), bn)
    conv = SyncBatchNorm.convert_sync_batchnorm(net)
    sync = conv[1]
    assert isinstance(sync, SyncBatchNorm) and sync is not bn
    assert sync.weight.tolist() == [2.0] * 4 and sync.running_mean.tolist() == bn.running_mean.tolist()
    assert int(sync.num_batches_tracked) == 1
    for mode in ("train", "eval"):
        getattr(bn, mode)()
        getattr(sync, mode)()
        np.testing.assert_allclose(sync(x).detach().numpy(), bn(x).detach().numpy(), rtol=1e-6)
    tnet = torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(4)))
    assert type(tnet[0]).__name__ == "SyncBatchNorm"
