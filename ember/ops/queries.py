"""PyTorch's questions about tensors and dtypes as functions: is_floating_point, is_complex, is_signed,
is_nonzero, is_same_size, broadcast_shapes, result_type and can_cast."""

from __future__ import annotations

from ember import dtypes as dt
from ember.ops._rules import broadcast_shapes as _broadcast


def is_floating_point(input) -> bool:
    """Whether the tensor's dtype is a floating-point one."""
    return input.dtype.is_floating_point


def is_complex(input) -> bool:
    """Whether the tensor's dtype is complex (never, here: Ember has no complex dtypes)."""
    return False


def is_signed(input) -> bool:
    """Whether the tensor's dtype holds negative values (the floats and the signed integers)."""
    return input.dtype.is_signed


def is_nonzero(input) -> bool:
    """Whether a one-value tensor's value is not zero."""
    if input.numel() != 1:
        raise RuntimeError(f"is_nonzero: expected a tensor of one value, got shape {tuple(input.shape)}")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input, other) -> bool:
    """Whether the two tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (an error naming them where they do not)."""
    from ember.size import Size

    as_tuples = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(_broadcast("broadcast_shapes", *as_tuples)) if as_tuples else Size(())


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op on these two tensors or numbers gives (PyTorch's promotion)."""
    operands = []
    for x in (tensor1, tensor2):
        dtype = getattr(x, "dtype", None)
        operands.append(x if dtype is None else (dt.as_dtype(dtype), x.ndim))
    return dt.result_type(*operands)


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules let an in-place op write a `from_` result into a `to` tensor: not from a
    float to an integer or bool, nor from an integer to bool."""
    return dt.as_dtype(to).category >= dt.as_dtype(from_).category
