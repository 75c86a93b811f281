"""Samplers: which dataset indices a DataLoader reads, in what order, and how they are batched."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import numpy as np

from ember.random import Generator, host_rng


class Sampler:
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} has no length")


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (or `num_samples` draws with replacement).

    Randomness comes from `generator`, else from Ember's default generator, so `ember.manual_seed`
    fixes the order.
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples must be a positive integer, got {num_samples!r}")

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = host_rng(self.generator)
        if not self.replacement and self.num_samples <= n:  # one permutation, cut to num_samples
            return iter(rng.permutation(n)[: self.num_samples].tolist())
        if n == 0:
            raise ValueError("RandomSampler: cannot draw samples from an empty data source")
        # Longer streams are drawn lazily (num_samples may be 10**10), from a generator of their own seeded
        # now, as PyTorch does: the order depends only on the state when iteration starts, not on what
        # else draws from `generator` while the stream is read.
        own = np.random.default_rng(int(rng.integers(0, 2**63)))
        return _draws(own, n, self.num_samples, self.replacement)

    def __len__(self) -> int:
        return self.num_samples


_CHUNK = 1024  # indices drawn at a time by a lazy RandomSampler


def _draws(rng: np.random.Generator, n: int, count: int, replacement: bool) -> Iterator[int]:
    """`count` indices below n: independent draws, or whole permutations one after another."""
    while count > 0:
        if replacement:
            chunk = rng.integers(0, n, size=min(count, _CHUNK))
        else:
            chunk = rng.permutation(n)[:count]
        count -= len(chunk)
        yield from chunk.tolist()


class SubsetRandomSampler(Sampler):
    """The given indices in random order."""

    def __init__(self, indices: Iterable[int], generator: Generator | None = None) -> None:
        self.indices = list(indices)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        perm = host_rng(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in perm.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights` (with replacement by default).

    Draws with replacement are made lazily from a generator of their own seeded when iteration starts,
    as RandomSampler's long streams are.
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples must be a positive integer, got {num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement must be a bool, got {replacement!r}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights must be a 1-D sequence, got shape {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite and non-negative, with a positive sum")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement from "
                             f"{np.count_nonzero(w)} indices of non-zero weight")
        from ember.creation import tensor

        self.weights = tensor(w)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        p = self.weights.numpy()
        rng = host_rng(self.generator)
        if not self.replacement:
            return iter(rng.choice(len(p), self.num_samples, replace=False, p=p / p.sum()).tolist())
        own = np.random.default_rng(int(rng.integers(0, 2**63)))
        return _weighted_draws(own, p / p.sum(), self.num_samples)

    def __len__(self) -> int:
        return self.num_samples


def _weighted_draws(rng: np.random.Generator, p: np.ndarray, count: int) -> Iterator[int]:
    while count > 0:
        chunk = rng.choice(len(p), size=min(count, _CHUNK), p=p)
        count -= len(chunk)
        yield from chunk.tolist()


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size` (the last one shorter unless drop_last)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
