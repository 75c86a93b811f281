"""Nested structures of values (lists, tuples, namedtuples, dicts), flattened and packed as TF's `nest` does.

Dictionaries flatten in sorted key order, as in TF; anything else is a leaf.
"""

from __future__ import annotations


def is_sequence(x) -> bool:
    """Whether x is a structure (list, tuple, namedtuple or dict) rather than a leaf."""
    return isinstance(x, (list, tuple, dict))


def flatten(structure) -> list:
    """The leaves of a structure, depth first."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [leaf for x in structure for leaf in flatten(x)]
    return [structure]


def pack_sequence_as(structure, flat) -> object:
    """`flat` (a list of leaves) arranged as `structure` is."""
    flat = list(flat)
    out, used = _pack(structure, flat, 0)
    if used != len(flat):
        raise ValueError(f"the structure has {used} leaves but {len(flat)} values were given")
    return out


def _pack(structure, flat: list, i: int):
    if isinstance(structure, dict):
        packed = {}
        for k in sorted(structure):
            packed[k], i = _pack(structure[k], flat, i)
        return type(structure)((k, packed[k]) for k in structure), i
    if isinstance(structure, (list, tuple)):
        items = []
        for x in structure:
            item, i = _pack(x, flat, i)
            items.append(item)
        if isinstance(structure, tuple) and hasattr(structure, "_fields"):
            return type(structure)(*items), i
        return type(structure)(items), i
    if i >= len(flat):
        raise ValueError("the structure has more leaves than values were given")
    return flat[i], i + 1


def assert_same_structure(a, b, what: str) -> None:
    """A ValueError naming `what` unless `a` and `b` nest the same way (leaves may differ)."""
    if _shape(a) != _shape(b):
        raise ValueError(f"{what}: the two structures don't have the same nested structure: {_shape(a)} and {_shape(b)}")


def _shape(x):
    if isinstance(x, dict):
        return ("dict", tuple((k, _shape(x[k])) for k in sorted(x)))
    if isinstance(x, (list, tuple)):
        return ("seq", tuple(_shape(e) for e in x))
    return "."
