"""`tf.pad` in all of TF's modes: CONSTANT (any fill value), REFLECT and SYMMETRIC (TF's MirrorPad op).

Mirror padding copies the tensor's own values across each edge: REFLECT leaves the edge out of the
copy ([1, 2, 3] padded by 2 on the left is [3, 2, 1, 2, 3]), SYMMETRIC repeats it ([2, 1, 1, 2, 3]).
So REFLECT needs each padding below the dimension's size, SYMMETRIC at most that size; as in TF,
that is checked when the graph runs (InvalidArgumentError), since sizes may only be known then.
Its gradient, MirrorPadGrad, folds the padded gradient back onto the positions it was copied from.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember import ops
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import spec
from ember.tensor import Tensor
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.errors import InvalidArgumentError
from ember.v1.naming import tf_op

MODES = ("CONSTANT", "REFLECT", "SYMMETRIC")


def source_index(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of a dimension of `size` mirror-padded by (before, after), the input position it copies."""
    j = np.arange(-before, size + after)
    if mode == "REFLECT":
        return np.where(j < 0, -j, np.where(j >= size, 2 * (size - 1) - j, j))
    return np.where(j < 0, -j - 1, np.where(j >= size, 2 * size - 1 - j, j))


def check_mirror_paddings(shape: tuple, paddings: tuple, mode: str) -> None:
    """InvalidArgumentError, in TF's words, where a padding is too large for mirror padding of `shape`."""
    for size, (before, after) in zip(shape, paddings):
        if size is None:
            continue
        if mode == "SYMMETRIC" and (before > size or after > size):
            raise InvalidArgumentError(f"paddings must be no greater than the dimension size: {before}, {after} "
                                       f"greater than {size}")
        if mode == "REFLECT" and (before >= size or after >= size):
            raise InvalidArgumentError(f"paddings must be less than the dimension size: {before}, {after} not "
                                       f"less than {size}")


def _padded_shape(shape: tuple, paddings: tuple, sign: int) -> tuple:
    if len(paddings) != len(shape):
        raise ShapeError(f"MirrorPad: {len(paddings)} rows of paddings for an input of shape {fmt_shape(shape)}; "
                         "the first dimension of paddings must be the rank of the input")
    return tuple(None if d is None else d + sign * (lo + hi) for d, (lo, hi) in zip(shape, paddings))


class MirrorPadOp(Op):
    """Mirror padding (mode REFLECT or SYMMETRIC) by `paddings`, one (before, after) pair per dimension."""

    name = "mirror_pad"
    fresh_output = True

    def infer(self, x, paddings, mode):
        return spec(_padded_shape(tuple(x.shape), paddings, 1), x.dtype)

    def kernel(self, xp, x, paddings, mode):
        check_mirror_paddings(x.shape, paddings, mode)
        out = x
        for axis, (before, after) in enumerate(paddings):
            if before or after:
                out = xp.take(out, xp.asarray(source_index(x.shape[axis], before, after, mode)), axis=axis)
        return out if out is not x else x.copy()

    def vjp(self, ctx, g):
        return (apply(mirror_pad_grad_op, g, paddings=ctx.attrs["paddings"], mode=ctx.attrs["mode"]),)


class MirrorPadGradOp(Op):
    """The gradient of MirrorPad: each padded position's value added back onto the input position it copied."""

    name = "mirror_pad_grad"
    fresh_output = True

    def infer(self, g, paddings, mode):
        return spec(_padded_shape(tuple(g.shape), paddings, -1), g.dtype)

    def kernel(self, xp, g, paddings, mode):
        out = g
        for axis, (before, after) in enumerate(paddings):
            if not (before or after):
                continue
            size = out.shape[axis] - before - after
            folded = xp.zeros(out.shape[:axis] + (size,) + out.shape[axis + 1:], dtype=out.dtype)
            index = (slice(None),) * axis + (xp.asarray(source_index(size, before, after, mode)),)
            xp.add.at(folded, index, out)
            out = folded
        return out if out is not g else g.copy()

    def vjp(self, ctx, g):
        return (apply(mirror_pad_op, g, paddings=ctx.attrs["paddings"], mode=ctx.attrs["mode"]),)


mirror_pad_op = register(MirrorPadOp())
mirror_pad_grad_op = register(MirrorPadGradOp())


def _static_paddings(paddings, x: Tensor) -> tuple:
    """Paddings (a list, an array or a constant tensor) as ((before, after), ...), checked as TF's shape function
    checks them: one row of two per dimension of `x`, none negative (ValueErrors)."""
    if isinstance(paddings, Tensor):
        node = paddings._data.node if is_symbolic(paddings) else None
        if node is not None and node.kind != "constant":
            raise NotImplementedError("pad: paddings computed in the graph are not supported; pass a list or a "
                                      "constant")
        paddings = node.attrs["value"] if node is not None else paddings.numpy()
    arr = np.asarray(paddings)
    if arr.size == 0:  # no rows: a scalar's paddings
        arr = arr.astype(np.int64).reshape(0, 2)
    if arr.dtype.kind not in "iu" or arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] != x.ndim:
        raise ValueError(f"Pad: paddings must be an integer matrix of shape [{x.ndim}, 2] for an input of shape "
                         f"{list(x.get_shape().as_list())}, got {arr.tolist()}")
    if (arr < 0).any():
        raise ValueError(f"Pad: Paddings must be non-negative, got {arr.tolist()}")
    return tuple((int(b), int(a)) for b, a in arr)


def _constant_pad(x: Tensor, pairs: tuple, constant_values) -> Tensor:
    flat = [p for pair in reversed(pairs) for p in pair]  # Ember's pad lists (before, after) from the last dim
    if isinstance(constant_values, Tensor):
        value = convert_to_tensor(constant_values)
        if value.dtype is not x.dtype:
            raise TypeError(f"Pad: constant_values of type {value.dtype.name} does not match type {x.dtype.name} of "
                            "the tensor padded")
        inside = ops.pad(ops.ones_like(x, dtype=dt.bool_), flat, value=False)
        return ops.where(inside, ops.pad(x, flat, value=0), value)
    if x.dtype.category != dt.FLOAT and isinstance(constant_values, float):
        raise TypeError(f"Expected {x.dtype.name}, got {constant_values!r} of type 'float' instead.")
    return ops.pad(x, flat, value=constant_values)


@tf_op("Pad")
def pad(tensor, paddings, mode: str = "CONSTANT", name: str | None = None, constant_values=0) -> Tensor:
    """Padding before and after each axis (paddings[i] = [before, after]): a constant (CONSTANT), the values
    mirrored without the edge (REFLECT) or with it (SYMMETRIC); the mode is case-insensitive, as in TF."""
    mode = str(mode).upper()
    if mode not in MODES:
        raise ValueError(f"Unknown padding mode: {mode}")
    x = convert_to_tensor(tensor)
    pairs = _static_paddings(paddings, x)
    if mode == "CONSTANT":
        return _constant_pad(x, pairs, constant_values)
    return apply(mirror_pad_op, x, paddings=pairs, mode=mode)
