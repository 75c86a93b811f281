"""`flatten`: any nesting of lists, tuples and dicts of arrays and numbers as one 1-D array, and its inverse.

As HIPS autograd's `autograd.misc.flatten`: dict entries in sorted key order, and `unflatten` rebuilds the
structure from a vector. NumPy leaves give a NumPy vector (and come back as NumPy arrays and Python
numbers); tensor leaves give an ember.numpy array. `unflatten` slices and reshapes, so it is differentiable:
a loss written on the structure can be differentiated through the flat vector.
"""

from __future__ import annotations

import numpy as np

from ember.tensor import Tensor

__all__ = ["flatten", "flatten_func"]


def _leaves(value, out: list):
    if type(value) in (list, tuple):
        return (type(value), [_leaves(v, out) for v in value])
    if type(value) is dict:
        keys = sorted(value)
        return (dict, [(k, _leaves(value[k], out)) for k in keys])
    out.append(value)
    return None


def flatten(value):
    """(1-D array of every number in `value`, unflatten): unflatten(vector) rebuilds value's structure."""
    leaves: list = []
    spec = _leaves(value, leaves)
    if any(isinstance(x, Tensor) for x in leaves):
        import ember.numpy as enp

        parts = [enp.ravel(x) for x in leaves]
        flat = enp.concatenate(parts) if parts else enp.array([])
    else:
        parts = [np.ravel(x) for x in leaves]
        flat = np.concatenate(parts) if parts else np.array([])
    layout = [(tuple(x.shape), x.numel(), False) if isinstance(x, Tensor) else
              (np.shape(x), int(np.size(x)), not isinstance(x, np.ndarray)) for x in leaves]

    def unflatten(vector):
        """The structure `flatten` was given, with values read from `vector` in order."""
        pieces, offset = [], 0
        for shape, size, number in layout:
            piece = vector[offset:offset + size].reshape(shape)
            offset += size
            if number and isinstance(piece, np.ndarray):
                piece = piece.item()  # a number stays a number (only when nothing is being differentiated)
            pieces.append(piece)
        return _build(spec, iter(pieces))

    return flat, unflatten


def _build(spec, pieces):
    if spec is None:
        return next(pieces)
    kind, children = spec
    if kind is dict:
        return {k: _build(c, pieces) for k, c in children}
    return kind(_build(c, pieces) for c in children)


def flatten_func(func, example):
    """(flat_func, unflatten, flat_example): flat_func(x, *args) is func on unflatten(x), flattened."""
    flat_example, unflatten = flatten(example)
    return (lambda x, *args: flatten(func(unflatten(x), *args))[0]), unflatten, flat_example
