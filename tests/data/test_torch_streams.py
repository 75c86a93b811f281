"""After the same manual_seed, Ember's samplers, loaders, splits and random transforms pick PyTorch's indices."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember as em
import ember.data as ed
from ember.data.transforms import RandomCrop, RandomHorizontalFlip


class _Indices:
    """A dataset whose items are their indices."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return i


def _seed(seed=0):
    em.manual_seed(seed)
    torch.manual_seed(seed)


def _next_draws_agree():
    np.testing.assert_array_equal(em.rand(3).numpy(), torch.rand(3).numpy())


def _batches(loader) -> list[list[int]]:
    return [np.asarray(b).tolist() for b in loader]


@pytest.mark.parametrize("with_generator", [False, True])
def test_a_shuffling_loader_yields_torchs_batches_epoch_after_epoch(with_generator):
    _seed(0)
    g, tg = (em.Generator().manual_seed(7), torch.Generator().manual_seed(7)) if with_generator else (None, None)
    ours = ed.DataLoader(_Indices(50), batch_size=8, shuffle=True, generator=g)
    theirs = tud.DataLoader(_Indices(50), batch_size=8, shuffle=True, generator=tg)
    for _ in range(3):
        got, expected = [], []
        for a, b in zip(ours, theirs):  # the model draws between batches, as training does
            got.append(np.asarray(a).tolist()), expected.append(b.tolist())
            np.testing.assert_array_equal(em.randn(4).numpy(), torch.randn(4).numpy())
        assert got == expected
    _next_draws_agree()


@pytest.mark.parametrize("num_samples", [None, 33, 100, 130])
@pytest.mark.parametrize("replacement", [False, True])
def test_random_sampler(num_samples, replacement):
    _seed(1)
    ours = list(ed.RandomSampler(_Indices(40), replacement=replacement, num_samples=num_samples))
    theirs = list(tud.RandomSampler(_Indices(40), replacement=replacement, num_samples=num_samples))
    assert ours == theirs
    g, tg = em.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    assert list(ed.RandomSampler(_Indices(40), replacement, num_samples, generator=g)) == \
        list(tud.RandomSampler(_Indices(40), replacement, num_samples, generator=tg))
    _next_draws_agree()


def test_subset_weighted_samplers_and_random_split():
    _seed(3)
    assert list(ed.SubsetRandomSampler(range(10, 40, 3))) == list(tud.SubsetRandomSampler(range(10, 40, 3)))
    weights = [0.1, 0.5, 2.0, 0.0, 1.5, 0.7, 0.2]
    for replacement, k in [(True, 40), (False, 5)]:
        assert list(ed.WeightedRandomSampler(weights, k, replacement)) == \
            list(tud.WeightedRandomSampler(weights, k, replacement))
    for lengths in ([3, 7, 10], [0.3, 0.3, 0.4]):
        g, tg = em.Generator().manual_seed(42), torch.Generator().manual_seed(42)
        ours = [list(s.indices) for s in ed.random_split(_Indices(20), lengths, generator=g)]
        theirs = [list(s.indices) for s in tud.random_split(_Indices(20), lengths, generator=tg)]
        assert ours == theirs
    _next_draws_agree()


def test_distributed_sampler_epochs():
    from ember.distributed.sampler import DistributedSampler

    for epoch in range(3):
        ours = DistributedSampler(_Indices(23), num_replicas=3, rank=1, seed=5)
        theirs = tud.DistributedSampler(_Indices(23), num_replicas=3, rank=1, seed=5)
        ours.set_epoch(epoch), theirs.set_epoch(epoch)
        assert list(ours) == list(theirs)


def test_random_crop_and_flip_draw_as_torchvision():
    img = np.arange(3 * 10 * 12, dtype=np.float32).reshape(3, 10, 12)
    _seed(4)
    crop, flip = RandomCrop((6, 5), padding=1), RandomHorizontalFlip(0.5)
    for _ in range(20):
        out = flip(crop(em.tensor(img))).numpy()
        # torchvision: RandomCrop.get_params draws torch.randint(0, h - th + 1, (1,)) then the same for w;
        # RandomHorizontalFlip flips when torch.rand(1) < p
        padded = np.pad(img, ((0, 0), (1, 1), (1, 1)))
        top = torch.randint(0, 12 - 6 + 1, size=(1,)).item()
        left = torch.randint(0, 14 - 5 + 1, size=(1,)).item()
        expected = padded[:, top:top + 6, left:left + 5]
        if torch.rand(1) < 0.5:
            expected = expected[:, :, ::-1]
        np.testing.assert_array_equal(out, expected)
    RandomCrop((10, 12))(em.tensor(img))  # the whole image: torchvision draws nothing
    _next_draws_agree()


class _Draws:
    """Items drawn inside the worker: Ember's (or torch's), NumPy's and Python's streams."""

    def __init__(self, torch_side: bool) -> None:
        self.torch_side = torch_side

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i):
        first = torch.rand(1).item() if self.torch_side else float(em.rand(1).numpy()[0])
        return np.array([first, np.random.rand(), random.random()])


def test_workers_are_seeded_as_torchs():
    _seed(5)
    theirs = np.concatenate([b.numpy() for b in tud.DataLoader(_Draws(True), batch_size=2, num_workers=2)])
    ours = np.concatenate([np.asarray(b) for b in ed.DataLoader(_Draws(False), batch_size=2, num_workers=2)])
    np.testing.assert_array_equal(ours, theirs)
