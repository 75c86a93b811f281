"""`DistributedSampler`: each rank reads its own share of a dataset (PyTorch's sampler).

The indices are shuffled with a generator seeded by `seed + epoch` (the same permutation on every
rank; call `set_epoch` each epoch), padded by repeating the first indices to a multiple of the
number of replicas (or, with drop_last, cut to one), and rank r takes every num_replicas-th index
from position r.
"""

from __future__ import annotations

import math

from ember.data.sampler import Sampler
from ember.random import Generator, host_rng


class DistributedSampler(Sampler):
    """The indices of `dataset` that rank `rank` of `num_replicas` reads this epoch."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        from ember.distributed.group import state

        if num_replicas is None or rank is None:
            if state.world is None:
                raise RuntimeError("DistributedSampler: pass num_replicas and rank, or call "
                                   "ember.distributed.init_process_group() first")
            num_replicas = state.world.size() if num_replicas is None else num_replicas
            rank = state.world.rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            gen = Generator().manual_seed(self.seed + self.epoch)
            indices = host_rng(gen).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0:
                indices += (indices * math.ceil(pad / max(len(indices), 1)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use the permutation of this epoch (every rank must set the same epoch)."""
        self.epoch = int(epoch)
