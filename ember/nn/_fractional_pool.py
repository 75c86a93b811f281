"""`fractional_max_pool2d/3d`: max pooling over windows whose starts follow PyTorch's pseudo-random interval sequence
(one sample in [0, 1) per sample, channel and dim). The starts are a few elementwise ops on the samples, the windows
one gather of the flattened planes, and the output a second gather at each window's maximum, so the gradient goes to
that one position and meta shapes and jit traces come from the ops."""

from __future__ import annotations

import math

import numpy as np

from ember import creation, dtypes, ops
from ember.autograd import grad_mode
from ember.nn._tuples import _ntuple
from ember.ops._rules import require_float
from ember.tensor import Tensor

_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}
# which of a plane's samples drives each pooled dim (PyTorch's kernels: 2-D reads (w, h), 3-D reads (t, h, w))
_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}


def _output_size(op: str, dims: int, input: Tensor, output_size, output_ratio) -> tuple:
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = _ntuple(dims)(output_ratio)
        if len(ratio) != dims:
            raise ValueError(f"{op} requires output_ratio to either be a single number or a tuple of {dims}, got "
                             f"{output_ratio}")
        return tuple(int(n * r) for n, r in zip(input.shape[-dims:], ratio))
    size = _ntuple(dims)(output_size)
    if len(size) != dims:
        raise RuntimeError(f"{op}: output_size must either be a single Int or tuple of {dims} Ints, got {output_size}")
    return tuple(int(s) for s in size)


def _check(op: str, dims: int, input: Tensor, kernel: tuple, out: tuple) -> None:
    shape = tuple(input.shape)
    if len(kernel) != dims:
        raise RuntimeError(f"{op}: kernel_size must either be a single Int or tuple of {dims} Ints, got {kernel}")
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{op}(): kernel_size must be greater than 0, got {kernel}")
    if any(s == 0 for s in shape[-dims - 1:]):
        raise RuntimeError(f"{op}(): expected input to have non-zero size for non-batch dimensions, got shape {shape}")
    # PyTorch's 3-D kernel wants the last window to end before the input does (its check is strict), the 2-D one not
    room = 0 if dims == 2 else 1
    for name, n, k, o in zip(_NAMES[dims], shape[-dims:], kernel, out):
        if o < 0:
            raise RuntimeError(f"{op}(): output_size {out} must not be negative (input shape {shape})")
        if o + k - 1 > n - room:
            raise RuntimeError(f"{op}(): pool {name} {k} too large relative to input {name} {n} (input shape {shape}, "
                               f"output size {out})")


def _samples(op: str, dims: int, input: Tensor, batch: int, samples: Tensor | None) -> Tensor:
    if samples is None:
        return creation.rand(batch, input.shape[1], dims, dtype=input.dtype, device=input.device)
    if samples.ndim != 3:
        raise RuntimeError(f"{op}(): expected _random_samples to have 3 dimensions, got shape {tuple(samples.shape)}")
    if samples.shape[2] != dims or samples.shape[0] < batch or samples.shape[1] != input.shape[1]:
        raise RuntimeError(f"{op}(): _random_samples of shape {tuple(samples.shape)} must be (at least {batch}, "
                           f"{input.shape[1]}, {dims}) for input of shape {tuple(input.shape)}")
    if samples.dtype != input.dtype:
        raise RuntimeError(f"{op}(): expected _random_samples to have the input's dtype {input.dtype.name}, got "
                           f"{samples.dtype.name}")
    return samples[:batch].detach()


def _starts(u: Tensor, n: int, k: int, o: int) -> Tensor:
    """(N, C, o) window starts in a dim of n: floor((i + u) * alpha) - floor(u * alpha), the last one n - k."""
    last = creation.full(tuple(u.shape) + (min(o, 1),), n - k, dtype=dtypes.int64, device=u.device)
    if o <= 1:
        return last
    # computed in the samples' dtype, as PyTorch's kernel computes in the input's scalar type
    np_dtype = u.dtype.np
    alpha = float(np.asarray(n - k, np_dtype) / np.asarray(o - 1, np_dtype))
    i = creation.arange(o - 1, dtype=u.dtype, device=u.device)
    steps = ((i + u.unsqueeze(-1)) * alpha).to(dtypes.int64) - (u * alpha).to(dtypes.int64).unsqueeze(-1)
    return ops.cat([steps, last], -1)


def _first_max(windows: Tensor) -> Tensor:
    """Each window's (last dim's) maximum as PyTorch's kernel picks it: the first maximum, or the last NaN."""
    nan = ops.isnan(windows)
    k = windows.shape[-1]
    last_nan = ops.argmax(ops.where(nan, creation.arange(1, k + 1, device=windows.device), 0), -1, keepdim=True)
    return ops.where(nan.any(-1, keepdim=True), last_nan, ops.argmax(windows, -1, keepdim=True))


def _fractional_max_pool(op: str, dims: int, input: Tensor, kernel_size, output_size, output_ratio,
                         samples: Tensor | None) -> tuple:
    require_float(op, input.dtype.np)
    kernel = _ntuple(dims)(kernel_size)
    if input.ndim not in (dims + 1, dims + 2):  # before the output size, which reads the last dims
        raise RuntimeError(f"{op}(): expected a {dims + 1}D or {dims + 2}D input, got shape {tuple(input.shape)}")
    out = _output_size(op, dims, input, output_size, output_ratio)
    _check(op, dims, input, kernel, out)
    unbatched = input.ndim == dims + 1
    x = input.unsqueeze(0) if unbatched else input
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    u = _samples(op, dims, x, n, samples)
    # flat input position of each window element: (N, C, *out, *kernel), from each dim's starts plus offsets
    index = None
    stride = 1
    for d in reversed(range(dims)):
        pos = _starts(u[..., _SAMPLE_OF_DIM[dims][d]], sizes[d], kernel[d], out[d]).unsqueeze(-1)
        pos = pos + creation.arange(kernel[d], dtype=dtypes.int64, device=x.device)  # (N, C, out_d, k_d)
        shape = [n, c] + [1] * (2 * dims)
        shape[2 + d], shape[2 + dims + d] = out[d], kernel[d]
        term = pos.reshape(tuple(shape)) * stride
        index = term if index is None else index + term
        stride *= sizes[d]
    # sizes spelled out rather than -1, which an empty batch or output leaves undetermined
    flat = x.reshape(n, c, math.prod(sizes))
    window_index = index.reshape(n, c, *out, math.prod(kernel))
    with grad_mode.no_grad():
        windows = ops.gather(flat.detach(), -1, window_index.reshape(n, c, math.prod(out) * math.prod(kernel)))
        at = ops.gather(window_index, -1, _first_max(windows.reshape(window_index.shape))).squeeze(-1)
    values = ops.gather(flat, -1, at.reshape(n, c, math.prod(out))).reshape(n, c, *out)
    if unbatched:
        return values.squeeze(0), at.squeeze(0)
    return values, at


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """fractional_max_pool2d's (values, indices): each maximum's flat h * W + w position in its input plane."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over (kH, kW) windows of (N, C, H, W) or (C, H, W) input at pseudo-random starts, to output_size (or
    output_ratio times the input size); with return_indices, also the maxima's flat positions."""
    values, indices = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                                         _random_samples)
    return (values, indices) if return_indices else values


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """fractional_max_pool3d's (values, indices): each maximum's flat (t * H + h) * W + w position in its volume."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over (kT, kH, kW) windows of (N, C, T, H, W) or (C, T, H, W) input at pseudo-random starts, to
    output_size (or output_ratio times the input size); with return_indices, also the maxima's flat positions."""
    values, indices = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                                         _random_samples)
    return (values, indices) if return_indices else values
