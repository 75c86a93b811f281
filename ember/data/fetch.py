"""Fetchers: turn a batch of indices into a collated batch (shared by the main process and workers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class MapFetcher:
    """Reads samples by index from a map-style dataset."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index) -> Any:
        """The collated batch for a list of indices (or the converted sample for one index)."""
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if getitems is not None else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """Reads the next samples from an iterable dataset; raises StopIteration when it is used up."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index) -> Any:
        """The next batch: as many samples as `index` has entries (or one sample without batching)."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            try:
                return self.collate_fn(next(self.iterator))
            except StopIteration:
                self.ended = True
                raise
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(dataset, is_iterable: bool, auto_collation: bool, collate_fn: Callable, drop_last: bool):
    """The fetcher for this kind of dataset."""
    cls = IterableFetcher if is_iterable else MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
