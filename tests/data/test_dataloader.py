"""DataLoader in the main process: batching, shuffling, collation, samplers and dataset helpers."""

import tracemalloc
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch.utils.data as tud

import ember as em
from ember.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)


def _data(n=10):
    x = em.arange(n * 3, dtype=em.float32).reshape(n, 3)
    y = em.arange(n)
    return TensorDataset(x, y)


def _ys(loader):
    return [b[1].tolist() for b in loader]


# --- datasets -----------------------------------------------------------------------------------
def test_tensor_dataset_rows_and_length():
    ds = _data(5)
    x, y = ds[2]
    assert x.tolist() == [6.0, 7.0, 8.0] and y.item() == 2 and len(ds) == 5


def test_tensor_dataset_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="same first dimension"):
        TensorDataset(em.zeros(3, 2), em.zeros(4))


def test_subset_concat_and_add():
    a, b = _data(4), _data(3)
    cat = a + b
    assert isinstance(cat, ConcatDataset) and len(cat) == 7
    assert cat[5][1].item() == 1 and cat[-1][1].item() == 2
    with pytest.raises(IndexError):
        cat[7]
    sub = Subset(a, [3, 0])
    assert len(sub) == 2 and sub[0][1].item() == 3


def test_concat_rejects_iterable():
    with pytest.raises(TypeError, match="ChainDataset"):
        ConcatDataset([_Stream(3)])


def test_random_split_counts_disjoint_and_seeded():
    ds = _data(10)
    parts = random_split(ds, [3, 7], generator=em.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    again = random_split(ds, [3, 7], generator=em.Generator().manual_seed(1))
    assert again[0].indices == parts[0].indices
    other = random_split(ds, [3, 7], generator=em.Generator().manual_seed(2))
    assert other[0].indices != parts[0].indices


@pytest.mark.parametrize("n,fractions", [(10, [0.3, 0.7]), (10, [0.33, 0.33, 0.34]), (7, [0.5, 0.5]), (6, [0.2, 0.2, 0.6])])
def test_random_split_fractions_round_like_pytorch(n, fractions):
    ours = [len(p) for p in random_split(_data(n), fractions)]
    theirs = [len(p) for p in tud.random_split(range(n), fractions)]
    assert ours == theirs


def test_random_split_errors():
    with pytest.raises(ValueError, match="sum to"):
        random_split(_data(5), [2, 2])
    with pytest.raises(ValueError, match="fractions"):
        random_split(_data(5), [0.5, 0.6])


# --- batching ------------------------------------------------------------------------------------
def test_batches_shapes_and_len():
    loader = DataLoader(_data(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 == len(batches)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert _ys(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][1].dtype == em.int64


def test_drop_last():
    loader = DataLoader(_data(10), batch_size=4, drop_last=True)
    assert len(loader) == 2 and _ys(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_default_batch_size_is_one():
    batches = list(DataLoader(_data(3)))
    assert len(batches) == 3 and tuple(batches[0][0].shape) == (1, 3)


def test_batch_size_none_converts_without_batching():
    class Arrays(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return np.full(3, i, np.int32), i

    out = list(DataLoader(Arrays(), batch_size=None))
    x, i = out[1]
    assert isinstance(x, em.Tensor) and x.dtype == em.int32 and x.tolist() == [1, 1, 1] and i == 1


def test_shuffle_is_a_permutation_and_seeded():
    def order(seed):
        g = em.Generator().manual_seed(seed)
        return sum(_ys(DataLoader(_data(20), batch_size=6, shuffle=True, generator=g)), [])

    a, b, c = order(0), order(0), order(1)
    assert sorted(a) == list(range(20)) and a == b and a != c
    assert a != list(range(20))


def test_shuffle_follows_manual_seed_without_generator():
    def order():
        em.manual_seed(123)
        return sum(_ys(DataLoader(_data(20), batch_size=5, shuffle=True)), [])

    assert order() == order()


def test_shuffle_changes_between_epochs():
    loader = DataLoader(_data(20), batch_size=20, shuffle=True, generator=em.Generator().manual_seed(0))
    assert _ys(loader) != _ys(loader)


def test_loader_argument_errors():
    ds = _data(4)
    with pytest.raises(ValueError, match="sampler or shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler"):
        DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 2, False), batch_size=2)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(_Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(SequentialSampler(ds), 0, False)


# --- collation -----------------------------------------------------------------------------------
def test_collate_dicts_tuples_and_nesting():
    samples = [{"img": np.full((2, 2), i, np.uint8), "meta": (i, float(i) / 2, f"s{i}"), "flag": i % 2 == 0}
               for i in range(3)]
    batch = default_collate(samples)
    assert isinstance(batch, dict) and set(batch) == {"img", "meta", "flag"}
    assert batch["img"].dtype == em.uint8 and tuple(batch["img"].shape) == (3, 2, 2)
    ints, floats, names = batch["meta"]
    assert isinstance(batch["meta"], tuple)
    assert ints.dtype == em.int64 and ints.tolist() == [0, 1, 2]
    assert floats.dtype == em.float64 and floats.tolist() == [0.0, 0.5, 1.0]
    assert names == ["s0", "s1", "s2"]
    assert batch["flag"].dtype == em.bool and batch["flag"].tolist() == [True, False, True]


def test_collate_matches_pytorch_values():
    rng = np.random.default_rng(0)
    samples = [(rng.standard_normal((3, 4)).astype(np.float32), int(i), np.int64(i * 2)) for i in range(5)]
    ours = default_collate(samples)
    theirs = tud.default_collate(samples)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


def test_collate_keeps_namedtuple_list_and_ordered_dict():
    Point = namedtuple("Point", "x y")
    batch = default_collate([Point(em.tensor(1.0), 2), Point(em.tensor(3.0), 4)])
    assert isinstance(batch, Point) and batch.x.tolist() == [1.0, 3.0] and batch.y.tolist() == [2, 4]
    lists = default_collate([[1, 2], [3, 4]])
    assert isinstance(lists, list) and [t.tolist() for t in lists] == [[1, 3], [2, 4]]
    od = default_collate([OrderedDict(a=1), OrderedDict(a=2)])
    assert isinstance(od, OrderedDict) and od["a"].tolist() == [1, 2]


def test_collate_stacks_tensors_and_reports_shape_mismatch():
    out = default_collate([em.ones(2, 3), em.zeros(2, 3)])
    assert tuple(out.shape) == (2, 2, 3)
    with pytest.raises(ValueError, match="stack"):
        default_collate([em.ones(2), em.ones(3)])


def test_collate_errors():
    with pytest.raises(RuntimeError, match="same number of fields"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="dtype"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": [np.float32(1.5), "x"]})
    assert out["a"].tolist() == [0, 1, 2] and out["b"][0].item() == 1.5 and out["b"][1] == "x"


def test_custom_collate_fn():
    loader = DataLoader(_data(4), batch_size=2, collate_fn=lambda batch: len(batch))
    assert list(loader) == [2, 2]


# --- samplers ------------------------------------------------------------------------------------
def test_sequential_and_random_samplers():
    ds = _data(6)
    assert list(SequentialSampler(ds)) == list(range(6))
    perm = list(RandomSampler(ds, generator=em.Generator().manual_seed(0)))
    assert sorted(perm) == list(range(6)) and len(RandomSampler(ds)) == 6
    draws = list(RandomSampler(ds, replacement=True, num_samples=20, generator=em.Generator().manual_seed(0)))
    assert len(draws) == 20 and all(0 <= i < 6 for i in draws)
    more = list(RandomSampler(ds, num_samples=9))
    assert len(more) == 9 and sorted(more[:6]) == list(range(6))


def test_random_sampler_with_replacement_draws_lazily():
    """10**10 draws with replacement used to be made up front (74.5 GiB); now they are drawn as read."""
    ds = _data(6)
    sampler = RandomSampler(ds, replacement=True, num_samples=10**10, generator=em.Generator().manual_seed(0))
    tracemalloc.start()
    try:
        it = iter(sampler)
        first = [next(it) for _ in range(5000)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20 and len(sampler) == 10**10 and set(first) == set(range(6))
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    assert len(loader) == 10**10 // 4 and len(next(iter(loader))[0]) == 4


def test_random_sampler_beyond_one_permutation_draws_whole_permutations_lazily():
    ds = _data(5)
    it = iter(RandomSampler(ds, num_samples=10**12, generator=em.Generator().manual_seed(1)))
    for _ in range(3):
        assert sorted(next(it) for _ in range(5)) == list(range(5))
    twelve = list(RandomSampler(ds, num_samples=12))
    assert len(twelve) == 12 and sorted(twelve[:10]) == sorted(list(range(5)) * 2)


def test_a_lazy_random_stream_does_not_depend_on_other_draws_while_it_is_read():
    # Without a generator of its own, the sampler seeds one from the default generator when it starts
    # (as PyTorch's does), so what else draws from the default generator meanwhile changes nothing.
    sampler = RandomSampler(_data(10), replacement=True, num_samples=3000)
    em.manual_seed(3)
    undisturbed = list(sampler)
    em.manual_seed(3)
    disturbed = []
    for i in sampler:
        disturbed.append(i)
        em.rand(1)  # something else draws from the default generator between reads
    assert disturbed == undisturbed
    with pytest.raises(ValueError, match="cannot draw samples from an empty data source"):
        iter(RandomSampler([], replacement=True, num_samples=3))


def test_subset_random_sampler():
    idx = list(SubsetRandomSampler([5, 7, 9], generator=em.Generator().manual_seed(0)))
    assert sorted(idx) == [5, 7, 9]


def test_batch_sampler_len_and_drop_last():
    assert list(BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]]
    assert len(BatchSampler(range(5), 2, False)) == 3 and len(BatchSampler(range(5), 2, True)) == 2


def test_loader_with_sampler_and_batch_sampler():
    ds = _data(6)
    assert _ys(DataLoader(ds, batch_size=2, sampler=[5, 4, 3, 2, 1, 0])) == [[5, 4], [3, 2], [1, 0]]
    loader = DataLoader(ds, batch_sampler=[[0, 5], [1]])
    assert _ys(loader) == [[0, 5], [1]] and len(loader) == 2


# --- iterable datasets ---------------------------------------------------------------------------
class _Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset_batches():
    loader = DataLoader(_Stream(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3
    loader = DataLoader(_Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2


def test_chain_dataset():
    assert list(DataLoader(ChainDataset([_Stream(2), _Stream(1)]), batch_size=None)) == [0, 1, 0]


def test_get_worker_info_is_none_in_main_process():
    assert get_worker_info() is None


def test_pytorch_style_training_loop_runs():
    x = em.randn(32, 2)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    seen = 0
    for xb, yb in loader:
        assert xb.shape[1] == 2 and yb.dtype == em.int64
        seen += len(yb)
    assert seen == 32
