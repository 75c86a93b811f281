"""`DataLoader`: batches from a dataset, in the main process or in worker processes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ember.data.collate import default_collate, default_convert
from ember.data.dataset import Dataset, IterableDataset
from ember.data.fetch import make_fetcher
from ember.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from ember.random import Generator, host_rng


class _InfiniteConstantSampler(Sampler):
    """None forever: the 'index' stream for iterable datasets, whose fetchers ignore it."""

    def __iter__(self) -> Iterator[None]:
        return itertools.repeat(None)


class DataLoader:
    """Iterate over a dataset in batches, optionally shuffled and loaded by worker processes.

    With `num_workers > 0` each batch is built by one of `num_workers` processes, which return
    arrays through shared memory; batches are still yielded in sampler order. Worker `i` is seeded
    as PyTorch seeds it: `base_seed + i` for Python `random` and Ember, a SeedSequence of both for
    NumPy, where `base_seed` is drawn from
    `generator` (else Ember's default generator) each time an epoch starts (persistent workers keep
    their first seeds), so a seeded generator gives the same shuffle with or without workers, and
    the same augmentations on every run with the same number of workers. A worker's
    exception is raised again here with the worker's traceback in its message; a worker that
    dies is reported as a RuntimeError, and `timeout` (seconds, 0 = wait forever) bounds the
    wait for any one batch. After an error the iterator is closed and its workers are stopped.
    """

    def __init__(
        self,
        dataset: Dataset | Iterable,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout must be non-negative, got {timeout}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor needs num_workers > 0")
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError(f"DataLoader: prefetch_factor must be at least 1, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory  # accepted for compatibility; host memory needs no pinning here
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._is_iterable = isinstance(dataset, IterableDataset)

        if self._is_iterable:
            if shuffle:
                raise ValueError("DataLoader: shuffle is not supported for an IterableDataset; shuffle its stream")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset takes no sampler or batch_sampler")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler excludes batch_size, shuffle, sampler and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: drop_last needs a batch_size")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: give either sampler or shuffle=True, not both")
        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _LoaderIter:
        if self.persistent_workers:
            it = self._iterator
            if it is None or it.closed:
                it = self._iterator = _LoaderIter(self)
            else:
                it.reset()
            return it
        return _LoaderIter(self)

    def __len__(self) -> int:
        if self._is_iterable:
            n = len(self.dataset)  # TypeError when the stream has no length, as in PyTorch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)


class _LoaderIter:
    """One pass over a DataLoader (reused across epochs with persistent workers)."""

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        self.is_iterable = loader._is_iterable
        self.auto_collation = loader._auto_collation
        self.collate_fn = loader.collate_fn
        self._num_yielded = 0
        self._start()
        self._workers = None
        self._fetcher = None
        if loader.num_workers > 0:
            from ember.data.multiprocess import MultiProcessIter

            self._workers = MultiProcessIter(loader, self._sampler_iter, self.base_seed, self.is_iterable,
                                             self.auto_collation, self.collate_fn)
        else:
            self._fetcher = make_fetcher(loader.dataset, self.is_iterable, self.auto_collation, self.collate_fn,
                                         loader.drop_last)

    def _start(self) -> None:
        # As PyTorch: the sampler's iterator first (a generator function: it draws nothing until the first
        # batch is asked for), then the workers' base seed, random_() on an int64 in every mode, so the
        # sampler sees the generator in the same state with or without workers.
        self._sampler_iter = iter(self._loader._index_sampler)
        self.base_seed = host_rng(self._loader.generator).random_seed()

    def next_index(self):
        """The next batch of indices (or single index) from the sampler."""
        return next(self._sampler_iter)

    @property
    def closed(self) -> bool:
        """Whether this iterator has no live workers."""
        return self._workers is None or self._workers.closed

    def reset(self) -> None:
        """Begin a new epoch on the same workers."""
        self._start()
        self._num_yielded = 0
        self._workers.reset(self._sampler_iter)

    def __iter__(self) -> _LoaderIter:
        return self

    def __next__(self) -> Any:
        if self._workers is None:
            return self._fetcher.fetch(self.next_index())
        try:
            data = self._workers.next()
        except StopIteration:
            raise
        except BaseException:
            self._workers.close(error=True)  # errors, timeouts and Ctrl-C all leave no worker behind
            raise
        self._num_yielded += 1
        return data

    def __len__(self) -> int:
        return len(self._loader)

    def close(self) -> None:
        """Stop this iterator's workers now."""
        if self._workers is not None:
            self._workers.close()
