"""`ember.utils.data` is `ember.data` at PyTorch's paths; WeightedRandomSampler against PyTorch's rules."""

import subprocess
import sys

import numpy as np
import pytest
import torch.utils.data as tud

import ember as em
import ember.data
import ember.utils.data as eud

TORCH_NAMES = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
               "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
               "WeightedRandomSampler", "BatchSampler", "default_collate", "default_convert", "get_worker_info"]


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torch_utils_data_names_are_ember_data_objects(name):
    assert hasattr(tud, name)
    assert getattr(eud, name) is getattr(ember.data, name)


def test_submodules_at_torchs_paths():
    from ember.utils.data.dataloader import DataLoader
    from ember.utils.data.dataset import Dataset
    from ember.utils.data.sampler import SubsetRandomSampler

    assert DataLoader is ember.data.DataLoader and Dataset is ember.data.Dataset
    assert SubsetRandomSampler is ember.data.SubsetRandomSampler
    assert em.utils.data is eud


def test_import_ember_then_ember_utils_data_works_without_importing_it_first():
    code = "import ember; print(ember.utils.data.DataLoader is ember.data.DataLoader)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_weighted_random_sampler():
    w = [0.1, 0.9, 0.0, 2.0]
    sampler = eud.WeightedRandomSampler(w, 30000, generator=em.Generator().manual_seed(0))
    draws = np.array(list(sampler))
    assert len(sampler) == len(draws) == 30000 and sampler.weights.dtype is em.float64
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 30000, np.array(w) / 3.0, atol=0.01)
    once = list(eud.WeightedRandomSampler(w, 3, replacement=False))
    assert sorted(once) == [0, 1, 3]


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (([0.1, 0.9, 0.5], 4), {"replacement": False}, "cannot draw 4 samples without replacement"),
    (([[1.0, 2.0]], 2), {}, r"weights must be a 1-D sequence, got shape \(1, 2\)"),
    (([1.0, 2.0], 0), {}, "num_samples must be a positive integer, got 0"),
    (([1.0, -2.0], 2), {}, "weights must be finite and non-negative"),
])
def test_weighted_random_sampler_refuses_what_torch_refuses(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        eud.WeightedRandomSampler(*args, **kwargs)
    with pytest.raises((ValueError, RuntimeError)):
        list(tud.WeightedRandomSampler(*args, **kwargs))


def test_weighted_sampling_without_replacement_never_draws_a_zero_weight():
    """PyTorch 2.13 returns index 2 here although its weight is 0; Ember refuses the request."""
    assert 2 in list(tud.WeightedRandomSampler([0.1, 0.9, 0.0], 3, replacement=False))
    with pytest.raises(ValueError, match="from 2 indices of non-zero weight"):
        eud.WeightedRandomSampler([0.1, 0.9, 0.0], 3, replacement=False)
