"""Samplers: which dataset indices a DataLoader reads, in what order, and how they are batched."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import numpy as np

from ember.random import Generator, default_generator, host_rng


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
    """A random permutation of the indices (or `num_samples` draws with replacement), in PyTorch's order.

    Randomness comes from `generator`, else from a generator seeded from the default one when iteration
    starts, so `ember.manual_seed` fixes the order (the same order as PyTorch's after the same seed).
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
        if n == 0 and self.num_samples:
            raise ValueError("RandomSampler: cannot draw samples from an empty data source")
        return self._indices(n)

    def _indices(self, n: int) -> Iterator[int]:
        # A generator function, as PyTorch's __iter__: nothing is drawn until the first index is asked for.
        # Without a generator of its own, the sampler seeds a fresh one from the default generator, so the
        # order depends only on the default generator's state when iteration starts.
        if n == 0:
            return
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(default_generator.random_seed())
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from generator.integers(0, n, 32).tolist()
            yield from generator.integers(0, n, self.num_samples % 32).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from generator.permutation(n).tolist()
            yield from generator.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in random order."""

    def __init__(self, indices: Iterable[int], generator: Generator | None = None) -> None:
        self.indices = list(indices)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in host_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

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
        from ember.creation import multinomial

        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


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
