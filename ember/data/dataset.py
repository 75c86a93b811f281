"""Datasets: the map-style and iterable interfaces, and ways to slice and join them."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ember.random import Generator, host_rng


class Dataset:
    """A map-style dataset: `len(ds)` samples, `ds[i]` returns sample i."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: implement `__iter__`; with workers, each worker iterates its own copy.

    Use `ember.data.get_worker_info()` inside `__iter__` to give each worker its share of the stream.
    """

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Iterable datasets read one after another."""

    def __init__(self, datasets: Iterable[IterableDataset]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class TensorDataset(Dataset):
    """Samples are the i-th rows of tensors (or arrays) that share their first dimension."""

    def __init__(self, *tensors) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = len(tensors[0])
        for i, t in enumerate(tensors):
            if len(t) != n:
                sizes = [len(x) for x in tensors]
                raise ValueError(f"TensorDataset: all tensors must have the same first dimension, got sizes {sizes} "
                                 f"(tensor {i} differs)")
        self.tensors = tuple(tensors)

    def __getitem__(self, index) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets joined end to end."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not take IterableDatasets; use ChainDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            if -index > n:
                raise IndexError(f"index {index} is out of range for a dataset of {n} samples")
            index += n
        if index >= n:
            raise IndexError(f"index {index} is out of range for a dataset of {n} samples")
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class StackDataset(Dataset):
    """Datasets of equal length read side by side: sample i is the tuple of their i-th samples (datasets given
    by position) or the dict of them (datasets given by keyword)."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError("StackDataset: pass the datasets either by position (tuple samples) or by keyword "
                             "(dict samples), not both")
        if not args and not kwargs:
            raise ValueError("StackDataset: at least one dataset should be passed")
        self.datasets: tuple | dict = args or kwargs
        lengths = [len(d) for d in (args or kwargs.values())]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"StackDataset: size mismatch between datasets, got lengths {lengths}")
        self._length = lengths[0]

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at `indices`, each dataset read by its own `__getitems__` where it has one (batched reads)."""
        named = self.datasets.items() if isinstance(self.datasets, dict) else enumerate(self.datasets)
        columns = {}
        for key, d in named:
            getitems = getattr(d, "__getitems__", None)
            if callable(getitems):
                items = getitems(indices)
                if len(items) != len(indices):
                    raise ValueError(f"StackDataset: a nested dataset returned {len(items)} samples for "
                                     f"{len(indices)} indices")
            else:
                items = [d[i] for i in indices]
            columns[key] = items
        if isinstance(self.datasets, dict):
            return [{k: items[j] for k, items in columns.items()} for j in range(len(indices))]
        return [tuple(items[j] for items in columns.values()) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class TransformDataset(Dataset):
    """Another dataset with a transform applied to each sample's input (and optionally its target)."""

    def __init__(self, dataset: Dataset, transform=None, target_transform=None) -> None:
        self.dataset = dataset
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        x, y = self.dataset[index][:2]
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y


def _split_lengths(n: int, lengths: Sequence[float]) -> list[int]:
    """Absolute lengths from counts or from fractions that sum to 1 (PyTorch's rounding)."""
    lengths = list(lengths)
    if all(isinstance(x, int) for x in lengths):
        if sum(lengths) != n:
            raise ValueError(f"random_split: the lengths {lengths} sum to {sum(lengths)}, "
                             f"but the dataset has {n} samples")
        return lengths
    if not math.isclose(sum(lengths), 1.0, abs_tol=1e-6) or any(not 0 <= f <= 1 for f in lengths):
        raise ValueError(f"random_split: fractions must lie in [0, 1] and sum to 1, got {lengths}")
    counts = [int(math.floor(n * f)) for f in lengths]
    for i in range(n - sum(counts)):  # hand the remainder out round-robin, as PyTorch does
        counts[i % len(counts)] += 1
    return counts


def random_split(dataset: Dataset, lengths: Sequence[float], generator: Generator | None = None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (counts, or fractions summing to 1)."""
    counts = _split_lengths(len(dataset), lengths)
    perm = host_rng(generator).permutation(sum(counts)).tolist()  # torch.randperm's order
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start:start + c]))
        start += c
    return out
