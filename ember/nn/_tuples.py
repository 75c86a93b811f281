"""Argument helpers shared by layers: int-or-tuple normalisation (`_pair` and friends)."""

from __future__ import annotations

import collections.abc
from itertools import repeat


def _ntuple(n: int, name: str = "parse"):
    def parse(x) -> tuple:
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """(a, b) -> (b, b, a, a) for n=2: the per-dim padding in the order `pad` wants."""
    return tuple(x for x in reversed(t) for _ in range(n))
