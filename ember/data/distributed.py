"""`DistributedSampler`: each rank reads its own share of a dataset (PyTorch's `torch.utils.data.distributed`).

The indices are shuffled by `torch.randperm`'s permutation from a generator seeded with `seed + epoch` (the same
on every rank; call `set_epoch` each epoch), padded by repeating the first indices to a multiple of the number of
replicas (or, with drop_last, cut to one), and rank r takes every num_replicas-th index from position r.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator

from ember.data.sampler import Sampler
from ember.random import Generator


class NoProcessGroupError(ValueError, RuntimeError):
    """No num_replicas or rank was given and no process group is initialised: the ValueError PyTorch raises, and
    the RuntimeError ember.distributed's sampler raised, so code written for either catches it."""


def _world() -> tuple[int, int] | None:
    """(world size, rank) of ember.distributed's initialised process group, else None.

    `ember.distributed` sits above this layer, so it is read, not imported: a process group can only have been
    initialised if its module is loaded.
    """
    group = sys.modules.get("ember.distributed.group")
    world = None if group is None else group.state.world
    return None if world is None else (world.size(), world.rank())


class DistributedSampler(Sampler):
    """The indices of `dataset` that rank `rank` of `num_replicas` reads this epoch (PyTorch's order).

    `num_replicas` and `rank` default to the world size and rank of `ember.distributed`'s process group.
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            world = _world()
            if world is None:
                raise NoProcessGroupError("DistributedSampler: the default process group has not been initialized; "
                                          "pass num_replicas and rank, or call "
                                          "ember.distributed.init_process_group() first")
            num_replicas = world[0] if num_replicas is None else num_replicas
            rank = world[1] if rank is None else rank
        if not isinstance(num_replicas, int) or isinstance(num_replicas, bool) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            # Cut to the largest multiple of num_replicas, so that every rank reads distinct samples.
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = Generator().manual_seed(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            # Pad with the first indices (repeated if the padding is longer than the data), as PyTorch does.
            pad = self.total_size - len(indices)
            if pad > 0:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use the permutation of this epoch (every rank must set the same epoch)."""
        self.epoch = epoch
