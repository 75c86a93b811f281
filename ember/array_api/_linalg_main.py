"""The linear-algebra functions of the main namespace: matmul, matrix_transpose, tensordot, vecdot."""

from __future__ import annotations

from ember import ops
from ember.array_api._helpers import check_array, promote_pair


def matmul(x1, x2, /):
    """The matrix product with broadcasting over batch axes (1-d operands as vectors)."""
    check_array("matmul", x1)
    check_array("matmul", x2)
    return ops.matmul(*promote_pair("matmul", x1, x2))


def matrix_transpose(x, /):
    """x with its last two axes swapped."""
    check_array("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"array_api.matrix_transpose: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return ops.swapaxes(x, -1, -2)


def tensordot(x1, x2, /, *, axes=2):
    """The sum of products over the last `axes` axes of x1 and the first of x2 (or the axes named)."""
    x1, x2 = promote_pair("tensordot", check_array("tensordot", x1), check_array("tensordot", x2))
    if not isinstance(axes, int):
        axes = tuple(tuple(a) for a in axes)
    return ops.tensordot(x1, x2, dims=axes)


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product of vectors along axis, broadcast over the other axes."""
    x1, x2 = promote_pair("vecdot", check_array("vecdot", x1), check_array("vecdot", x2))
    if not -min(x1.ndim, x2.ndim) <= axis < 0 and not 0 <= axis < min(x1.ndim, x2.ndim):
        raise ValueError(f"array_api.vecdot: axis {axis} is out of range for shapes {tuple(x1.shape)}, "
                         f"{tuple(x2.shape)}")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"array_api.vecdot: sizes along axis {axis} differ: {tuple(x1.shape)} vs {tuple(x2.shape)}")
    return ops.sum(x1 * x2, dim=axis, dtype=x1.dtype)
