"""Volumetric (3-D) convolution and pooling over (N, C, D, H, W), composed of the 2-D ops: a 3-D convolution is the sum
over the kernel's depth taps of 2-D convolutions of depth slices (the slices stacked into the batch), its transpose
the 2-D transposed convolutions added at their output depths, and max, average and adaptive pooling are separable
(the planes pooled first, then the depth). So each gets its gradients, meta shapes and jit traces from the 2-D ops,
and their kernels."""

from __future__ import annotations

import math

import numpy as np

from ember import creation, ops
from ember.errors import ShapeError
from ember.nn._tuples import _triple
from ember.ops._rules import refuse_bool, refuse_mixed
from ember.tensor import Tensor


def _batched(op: str, input: Tensor) -> tuple:
    if input.ndim not in (4, 5):
        raise ShapeError(f"{op}: expected a 5-D (N, C, D, H, W) or 4-D (C, D, H, W) input, got shape "
                         f"{tuple(input.shape)}")
    return (input.unsqueeze(0), True) if input.ndim == 4 else (input, False)


def _slices(x: Tensor, start: int, count: int, step: int) -> Tensor:
    """Depth slices start, start + step, ... (count of them) of (N, C, D, H, W) as a batch of planes (N*count, C, H, W)."""
    n, c, _, h, w = x.shape
    picked = x[:, :, start:start + (count - 1) * step + 1:step]
    return picked.permute(0, 2, 1, 3, 4).reshape(n * count, c, h, w)


def _volume(planes: Tensor, n: int) -> Tensor:
    """(N*D, C, H, W) planes back to (N, C, D, H, W)."""
    nd, c, h, w = planes.shape
    return planes.reshape(n, nd // n, c, h, w).permute(0, 2, 1, 3, 4)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3-D cross-correlation of (N, C, D, H, W) input with an (out, in/groups, kd, kh, kw) weight."""
    refuse_bool("conv3d", input, weight)
    x, unbatched = _batched("conv3d", input)
    if weight.ndim != 5:
        raise ShapeError(f"conv3d: expected a 5-D weight (out, in/groups, kd, kh, kw), got shape {tuple(weight.shape)}")
    if x.shape[1] != weight.shape[1] * groups:
        raise ShapeError(f"conv3d: input {tuple(input.shape)} has {x.shape[1]} channels, weight {tuple(weight.shape)} "
                         f"with groups={groups} expects {weight.shape[1] * groups}")
    refuse_mixed("conv3d", ("input", "weight") + (("bias",) if bias is not None else ()), input, weight,
                 *(() if bias is None else (bias,)))
    (sd, sh, sw), (dd, dh, dw) = _triple(stride), _triple(dilation)
    kd, kh, kw = weight.shape[2:]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"conv3d: padding must be 'valid', 'same', an int or 3 ints, got {padding!r}")
        if padding == "same" and (sd, sh, sw) != (1, 1, 1):
            raise ValueError("conv3d: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip((dd, dh, dw), (kd, kh, kw))] if padding == "same" else [0, 0, 0]
        pads = (totals[2] // 2, totals[2] - totals[2] // 2, totals[1] // 2, totals[1] - totals[1] // 2,
                totals[0] // 2, totals[0] - totals[0] // 2)
        x = ops.pad(x, pads) if any(pads) else x
        pd = ph = pw = 0
    else:
        pd, ph, pw = _triple(padding)
        x = ops.pad(x, (0, 0, 0, 0, pd, pd)) if pd else x
    n, depth = x.shape[0], x.shape[2]
    out_depth = (depth - dd * (kd - 1) - 1) // sd + 1
    if out_depth <= 0:
        raise ShapeError(f"conv3d: the input's depth {input.shape[-3]} (padded {depth}) is smaller than the dilated "
                         f"kernel's {dd * (kd - 1) + 1}")
    out = None
    for k in range(kd):  # each depth tap: a 2-D convolution of the depth slices it reads
        term = ops.conv2d(_slices(x, k * dd, out_depth, sd), weight[:, :, k], None, (sh, sw), (ph, pw), (dh, dw),
                          groups)
        out = term if out is None else out + term
    out = _volume(out, n)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 3-D convolution (conv3d's gradient with respect to its input); weight (in, out/groups, kd, kh, kw)."""
    refuse_bool("conv_transpose3d", input, weight)
    x, unbatched = _batched("conv_transpose3d", input)
    if weight.ndim != 5 or x.shape[1] != weight.shape[0]:
        raise ShapeError(f"conv_transpose3d: expected a (in, out/groups, kd, kh, kw) weight for input "
                         f"{tuple(input.shape)}, got weight {tuple(weight.shape)}")
    (sd, sh, sw), (pd, ph, pw) = _triple(stride), _triple(padding)
    (opd, oph, opw), (dd, dh, dw) = _triple(output_padding), _triple(dilation)
    if opd >= max(sd, dd):
        raise ValueError(f"conv_transpose3d: output_padding {output_padding} must be smaller than stride or dilation")
    n, _, depth = x.shape[:3]
    kd = weight.shape[2]
    full = (depth - 1) * sd + dd * (kd - 1) + opd + 1  # before the padding is cropped
    out_depth = full - 2 * pd
    if out_depth <= 0:
        raise ShapeError(f"conv_transpose3d: the output depth {out_depth} is not positive for input "
                         f"{tuple(input.shape)}")
    planes = _slices(x, 0, depth, 1)
    out = None
    for k in range(kd):  # each depth tap's planes land at output depths d * sd + k * dd
        term = _volume(ops.conv_transpose2d(planes, weight[:, :, k], None, (sh, sw), (ph, pw), (oph, opw), groups,
                                            (dh, dw)), n)
        at = creation.tensor(np.arange(depth) * sd + k * dd, device=input.device)
        empty = creation.zeros((n, term.shape[1], full) + tuple(term.shape[3:]), dtype=term.dtype, device=term.device)
        placed = ops.index_add(empty, 2, at, term)
        out = placed if out is None else out + placed
    out = out[:, :, pd:pd + out_depth]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _pool_sizes(kernel_size, stride, padding, dilation=1) -> tuple:
    kernel = _triple(kernel_size)
    stride = kernel if stride is None or stride == [] or stride == () else _triple(stride)
    return kernel, stride, _triple(padding), _triple(dilation)


def _depth_rows(planes: Tensor, n: int, c: int) -> Tensor:
    """(N*C... as (N, C*D, Ho, Wo)) planes as (N, C, D, Ho*Wo): the depth pass's rows."""
    return planes.reshape(n, c, -1, planes.shape[-2] * planes.shape[-1])


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over (kd, kh, kw) windows (with return_indices, also the flat d*H*W + h*W + w input positions): each
    plane pooled, then the depth, the first maximum of each window in (d, h, w) order taking the gradient."""
    x, unbatched = _batched("max_pool3d", input)
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = _pool_sizes(kernel_size, stride, padding, dilation)
    n, c, depth, h, w = x.shape
    planes = ops.max_pool2d(x.reshape(n, c * depth, h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode,
                            return_indices)
    if return_indices:
        planes, plane_at = planes
    ho, wo = planes.shape[-2:]
    pooled = ops.max_pool2d(_depth_rows(planes, n, c), (kd, 1), (sd, 1), (pd, 0), (dd, 1), ceil_mode, return_indices)
    if not return_indices:
        out = pooled.reshape(n, c, -1, ho, wo)
        return out.squeeze(0) if unbatched else out
    pooled, depth_at = pooled
    d = depth_at // (ho * wo)  # the depth each maximum came from, then its position in that plane
    at = ops.gather(_depth_rows(plane_at, n, c), 2, d) + d * (h * w)
    out, at = pooled.reshape(n, c, -1, ho, wo), at.reshape(n, c, -1, ho, wo)
    return (out.squeeze(0), at.squeeze(0)) if unbatched else (out, at)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Mean over (kd, kh, kw) windows: each plane's windows averaged, then the depth's (both divisors per dim, so
    their product is PyTorch's)."""
    x, unbatched = _batched("avg_pool3d", input)
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), _ = _pool_sizes(kernel_size, stride, padding)
    n, c, depth, h, w = x.shape
    by = 1 if divisor_override else None  # sums; divided once at the end
    planes = ops.avg_pool2d(x.reshape(n, c * depth, h, w), (kh, kw), (sh, sw), (ph, pw), ceil_mode,
                            count_include_pad, by)
    ho, wo = planes.shape[-2:]
    out = ops.avg_pool2d(_depth_rows(planes, n, c), (kd, 1), (sd, 1), (pd, 0), ceil_mode, count_include_pad, by)
    out = out.reshape(n, c, -1, ho, wo)
    if divisor_override:
        out = out / divisor_override
    return out.squeeze(0) if unbatched else out


def _adaptive_sizes(input: Tensor, output_size) -> tuple:
    sizes = _triple(output_size)
    return tuple(int(s) if o is None else int(o) for o, s in zip(sizes, input.shape[-3:]))


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed (D, H, W) output size (PyTorch's start/end window rule per dim)."""
    x, unbatched = _batched("adaptive_avg_pool3d", input)
    od, oh, ow = _adaptive_sizes(x, output_size)
    n, c, depth, h, w = x.shape
    planes = ops.adaptive_avg_pool2d(x.reshape(n, c * depth, h, w), (oh, ow))
    out = ops.adaptive_avg_pool2d(_depth_rows(planes, n, c), (od, oh * ow)).reshape(n, c, od, oh, ow)
    return out.squeeze(0) if unbatched else out


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed (D, H, W) output size (with return_indices, also each maximum's flat input position)."""
    from ember.nn.functional import adaptive_max_pool2d

    x, unbatched = _batched("adaptive_max_pool3d", input)
    od, oh, ow = _adaptive_sizes(x, output_size)
    n, c, depth, h, w = x.shape
    planes, plane_at = adaptive_max_pool2d(x.reshape(n, c * depth, h, w), (oh, ow), True)
    pooled, depth_at = adaptive_max_pool2d(_depth_rows(planes, n, c), (od, oh * ow), True)
    out = pooled.reshape(n, c, od, oh, ow)
    if not return_indices:
        return out.squeeze(0) if unbatched else out
    d = depth_at // (oh * ow)
    at = (ops.gather(_depth_rows(plane_at, n, c), 2, d) + d * (h * w)).reshape(n, c, od, oh, ow)
    return (out.squeeze(0), at.squeeze(0)) if unbatched else (out, at)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum of x**p over each (kd, kh, kw) window)**(1/p), PyTorch's formula (as lp_pool2d's)."""
    kd, kh, kw = _triple(kernel_size)
    if norm_type == math.inf:
        return max_pool3d(input, (kd, kh, kw), stride, 0, 1, ceil_mode)
    out = avg_pool3d(ops.pow(input, norm_type), (kd, kh, kw), stride, 0, ceil_mode)
    return ops.pow(ops.sign(out) * ops.relu(ops.abs(out)) * (kd * kh * kw), 1.0 / norm_type)
