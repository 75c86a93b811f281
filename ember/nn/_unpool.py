"""`max_unpool1d/2d/3d`: max pooling's values put back at the positions its indices name, zeros elsewhere (a
scatter into each channel's flattened map, so the gradient is the gather at those positions)."""

from __future__ import annotations

from ember import creation, ops
from ember.errors import IndexOutOfBoundsError, ShapeError
from ember.nn._tuples import _ntuple
from ember.tensor import Tensor


def _unpool(op: str, dims: int, input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size) -> Tensor:
    tuple_of = _ntuple(dims)
    kernel = tuple_of(kernel_size)
    stride = kernel if stride is None or stride == [] or stride == () else tuple_of(stride)
    padding = tuple_of(padding)
    if input.ndim not in (dims + 1, dims + 2):
        raise ShapeError(f"{op}: expected a {dims + 2}-D (batched) or {dims + 1}-D input, got shape "
                         f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(f"{op}: indices must have the input's shape {tuple(input.shape)}, got {tuple(indices.shape)}")
    sizes = tuple(input.shape[-dims:])
    default = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(sizes, stride, padding, kernel))
    if output_size is None:
        out_sizes = default
    else:
        out_sizes = tuple(int(v) for v in output_size)[-dims:]
        if len(out_sizes) != dims or any(not d - s < o < d + s for o, d, s in zip(out_sizes, default, stride)):
            raise ValueError(f"{op}: output_size {tuple(output_size)} must be within a stride of the default size "
                             f"{default} in each dim")
    lead = tuple(input.shape[:-dims])
    plane = 1
    for o in out_sizes:
        plane *= o
    flat_in, flat_at = input.reshape(lead + (-1,)), indices.reshape(lead + (-1,))
    out = creation.zeros(lead + (plane,), dtype=input.dtype, device=input.device)
    try:
        return ops.scatter(out, -1, flat_at, flat_in).reshape(lead + out_sizes)
    except IndexOutOfBoundsError:
        raise IndexOutOfBoundsError(f"{op}: an index is outside the {out_sizes} output (pass the pooled input's size "
                                    "as output_size)") from None


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """max_pool1d's inverse: (N, C, L) values at their indices of a (N, C, L_out) map, zeros elsewhere."""
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """max_pool2d's inverse: (N, C, H, W) values at their flat h * W_out + w positions, zeros elsewhere."""
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """max_pool3d's inverse: (N, C, D, H, W) values at their flat positions, zeros elsewhere."""
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
