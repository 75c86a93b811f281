"""DistributedSampler gives every rank PyTorch's indices; StackDataset reads datasets side by side as PyTorch's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember as em
import ember.data as ed
import ember.utils.data as eud


class _Indices:
    """A map-style dataset whose sample i is i."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


COMBINATIONS = [
    (n, replicas, shuffle, drop_last, seed)
    for n, replicas in [(0, 2), (1, 3), (2, 7), (10, 1), (10, 3), (11, 4), (23, 3), (64, 8)]
    for shuffle, drop_last, seed in [(True, False, 0), (True, True, 5), (False, False, 0), (False, True, 0),
                                     (True, False, -3)]
]


@pytest.mark.parametrize(("n", "replicas", "shuffle", "drop_last", "seed"), COMBINATIONS,
                         ids=[f"n{n}-r{r}-shuffle{s}-drop{d}-seed{e}" for n, r, s, d, e in COMBINATIONS])
def test_every_ranks_indices_equal_torchs_over_epochs(n, replicas, shuffle, drop_last, seed):
    """Same indices, length and total size for each rank and epoch: the same permutation (torch.randperm's for
    seed + epoch), the same padding (repeated when shorter than the data) and the same cut for drop_last."""
    for rank, epoch in itertools.product(range(replicas), (0, 1, 3)):
        kwargs = dict(num_replicas=replicas, rank=rank, shuffle=shuffle, drop_last=drop_last, seed=seed)
        ours, theirs = ed.DistributedSampler(_Indices(n), **kwargs), tud.DistributedSampler(_Indices(n), **kwargs)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert list(ours) == list(theirs), f"rank {rank}, epoch {epoch}"
        assert len(ours) == len(theirs) and ours.total_size == theirs.total_size


def test_epochs_reshuffle_and_the_ranks_share_the_data():
    ranks = [ed.DistributedSampler(range(20), num_replicas=4, rank=r, seed=1) for r in range(4)]
    first = [list(s) for s in ranks]
    assert sorted(itertools.chain(*first)) == list(range(20))
    assert list(ranks[0]) == first[0]  # the same epoch gives the same order again
    for s in ranks:
        s.set_epoch(1)
    second = [list(s) for s in ranks]
    assert second != first and sorted(itertools.chain(*second)) == list(range(20))


def test_a_data_loader_reads_its_ranks_batches():
    data = ed.TensorDataset(em.arange(10))
    loader = ed.DataLoader(data, batch_size=2, sampler=ed.DistributedSampler(data, num_replicas=3, rank=2, seed=7))
    their_loader = tud.DataLoader(tud.TensorDataset(torch.arange(10)), batch_size=2,
                                  sampler=tud.DistributedSampler(range(10), num_replicas=3, rank=2, seed=7))
    assert [b[0].tolist() for b in loader] == [b[0].tolist() for b in their_loader]


def test_the_world_comes_from_ember_distributed_when_initialised():
    import ember.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(ValueError, match="pass num_replicas and rank, or call .*init_process_group"):
        ed.DistributedSampler(range(4))  # PyTorch's class (it is a RuntimeError too, as Ember's was)
    with pytest.raises(RuntimeError, match="process group has not been initialized"):
        ed.DistributedSampler(range(4), num_replicas=2)
    dist.init_process_group()  # without a launcher: a world of one
    try:
        sampler = ed.DistributedSampler(range(5), shuffle=False)
        assert (sampler.num_replicas, sampler.rank, list(sampler)) == (1, 0, [0, 1, 2, 3, 4])
        assert ed.DistributedSampler(range(6), rank=1, num_replicas=2, shuffle=False).rank == 1
    finally:
        dist.destroy_process_group()


def test_bad_ranks_and_replicas():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        ed.DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        ed.DistributedSampler(range(4), num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="num_replicas must be a positive int, got 0"):
        ed.DistributedSampler(range(4), num_replicas=0, rank=0)


def test_the_data_classes_are_at_torchs_paths():
    from ember.utils.data.distributed import DistributedSampler

    assert DistributedSampler is eud.DistributedSampler is ed.DistributedSampler
    assert eud.StackDataset is ed.StackDataset
    assert {"DistributedSampler", "StackDataset"} <= set(eud.__all__)


# --- StackDataset -------------------------------------------------------------------------------------------------
class _Batched(_Indices):
    """A dataset with a batched read (`__getitems__`), which StackDataset uses."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.batched_reads = 0

    def __getitem__(self, i: int) -> int:
        return 10 * i

    def __getitems__(self, indices: list) -> list:
        self.batched_reads += 1
        return [10 * i for i in indices]


def test_stack_dataset_reads_tuples_and_dicts_as_torchs():
    values = np.arange(12.0).reshape(6, 2)
    ours = ed.StackDataset(_Indices(6), ed.TensorDataset(em.tensor(values)))
    theirs = tud.StackDataset(_Indices(6), tud.TensorDataset(torch.tensor(values)))
    assert len(ours) == len(theirs) == 6
    assert ours[4][0] == theirs[4][0] and ours[4][1][0].tolist() == theirs[4][1][0].tolist()
    named, their_named = ed.StackDataset(a=_Indices(6), b=_Batched(6)), tud.StackDataset(a=_Indices(6), b=_Batched(6))
    assert named[2] == their_named[2] == {"a": 2, "b": 20}
    assert named.__getitems__([5, 0, 3]) == their_named.__getitems__([5, 0, 3])
    assert named.datasets["b"].batched_reads == 1
    stacked = ed.StackDataset(_Batched(6), _Indices(6))
    assert stacked.__getitems__([1, 4]) == tud.StackDataset(_Batched(6), _Indices(6)).__getitems__([1, 4])
    batches = list(ed.DataLoader(named, batch_size=4))
    assert [b["a"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]
    assert [b["b"].tolist() for b in batches] == [[0, 10, 20, 30], [40, 50]]


def test_stack_dataset_refuses_what_torch_refuses():
    for args, kwargs, message in [([_Indices(2)], {"b": _Indices(2)}, "either by position"),
                                  ([], {}, "at least one dataset"),
                                  ([_Indices(2), _Indices(3)], {}, r"size mismatch between datasets.*\[2, 3\]")]:
        with pytest.raises(ValueError, match=message):
            ed.StackDataset(*args, **kwargs)
        with pytest.raises(ValueError):
            tud.StackDataset(*args, **kwargs)

    class Short(_Batched):
        def __getitems__(self, indices):
            return super().__getitems__(indices)[:-1]

    with pytest.raises(ValueError, match="returned 1 samples for 2 indices"):
        ed.StackDataset(Short(3)).__getitems__([0, 1])
