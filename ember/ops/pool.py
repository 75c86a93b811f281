"""2-D max and average pooling (NCHW), as loops over kernel positions of strided views (max pooling
compiled, see kernels/pooling.py, where Numba is installed).

Sums (average windows, and gradients of overlapping windows) of float16/bfloat16 run in float32.
"""

from __future__ import annotations

import math

import numpy as np

from ember.dispatch import apply
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.kernels.pooling import LOCAL_INDEX, max_pool2d_backward_compiled, max_pool2d_compiled
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, refuse_bool, spec
from ember.ops.opmath import rounded, upcast


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def pool_out_size(size, k, s, p, d, ceil_mode):
    """Output length of pooling along one dim (PyTorch's rule, including ceil_mode)."""
    if size is None:
        return None
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _geometry(op, x, kernel, stride, padding, dilation, ceil_mode):
    if len(x.shape) != 4:
        raise ShapeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {fmt_shape(x.shape)}")
    kh, kw = kernel
    for k, p in zip(kernel, padding):
        if p > k // 2:
            raise ValueError(f"{op}: padding {padding} must be at most half the kernel size {kernel}")
    oh = pool_out_size(x.shape[2], kh, stride[0], padding[0], dilation[0], ceil_mode)
    ow = pool_out_size(x.shape[3], kw, stride[1], padding[1], dilation[1], ceil_mode)
    if (oh is not None and oh <= 0) or (ow is not None and ow <= 0):
        raise ShapeError(f"{op}: input {fmt_shape(x.shape)} is too small for kernel {kernel} with padding {padding}")
    return oh, ow


def _padded(xp, x, padding, oh, ow, kernel, stride, dilation, fill):
    """Pad (including the extra right/bottom rows ceil_mode needs) with `fill`."""
    ph, pw = padding
    need_h = (oh - 1) * stride[0] + dilation[0] * (kernel[0] - 1) + 1
    need_w = (ow - 1) * stride[1] + dilation[1] * (kernel[1] - 1) + 1
    extra_h = max(0, need_h - (x.shape[2] + 2 * ph))
    extra_w = max(0, need_w - (x.shape[3] + 2 * pw))
    if ph or pw or extra_h or extra_w:
        x = xp.pad(x, ((0, 0), (0, 0), (ph, ph + extra_h), (pw, pw + extra_w)), constant_values=fill)
    return x


def _window(xp, xpad, i, j, oh, ow, stride, dilation):
    r0, c0 = i * dilation[0], j * dilation[1]
    return xpad[:, :, r0 : r0 + stride[0] * (oh - 1) + 1 : stride[0], c0 : c0 + stride[1] * (ow - 1) + 1 : stride[1]]


class MaxPool2dOp(Op):
    """Outputs (values, window-local argmax); the local index drives the backward pass."""

    name = "max_pool2d"
    fresh_output = True
    n_outputs = 2
    save_outputs = (1,)

    def infer(self, x, kernel, stride, padding, dilation, ceil_mode):
        oh, ow = _geometry(self.name, x, kernel, stride, padding, dilation, ceil_mode)
        shape = (x.shape[0], x.shape[1], oh, ow)
        return spec(shape, x.dtype), spec(shape, LOCAL_INDEX)

    def kernel(self, xp, x, kernel, stride, padding, dilation, ceil_mode):
        oh, ow = _geometry(self.name, x, kernel, stride, padding, dilation, ceil_mode)
        compiled = max_pool2d_compiled(xp, x, kernel, stride, padding, dilation, oh, ow)
        if compiled is not None:
            return compiled
        fill = -np.inf if x.dtype in FLOAT_NP else np.iinfo(x.dtype).min
        xpad = _padded(xp, x, padding, oh, ow, kernel, stride, dilation, fill)
        best = _window(xp, xpad, 0, 0, oh, ow, stride, dilation).copy()
        nan_aware = x.dtype in FLOAT_NP and bool(xp.isnan(x).any())
        idx = xp.zeros(best.shape, dtype=LOCAL_INDEX)
        k = 0
        # Arithmetic updates instead of masked assignment: masks here are unpredictable, and
        # NumPy's masked copy/where are several times slower than a multiply on such masks.
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                if k:
                    v = _window(xp, xpad, i, j, oh, ow, stride, dilation)
                    better = v > best
                    if nan_aware:  # NaN wins, as in PyTorch (the last NaN of a window)
                        better |= xp.isnan(v)
                        xp.copyto(best, v, where=better)
                    else:
                        xp.maximum(best, v, out=best)
                    idx += better * (k - idx)
                k += 1
        return best, idx

    def vjp(self, ctx, g, _gi=None):
        a = ctx.attrs
        return (apply(_max_pool2d_backward_op, g, ctx.output_at(1), in_shape=ctx.in_shape(0), **a),)


_max_pool2d_op = register(MaxPool2dOp())


class MaxPool2dBackwardOp(Op):
    name = "max_pool2d_backward"
    fresh_output = True
    differentiable = False

    def infer(self, g, idx, in_shape, kernel, stride, padding, dilation, ceil_mode):
        return spec(in_shape, g.dtype)

    def kernel(self, xp, g, idx, in_shape, kernel, stride, padding, dilation, ceil_mode):
        compiled = max_pool2d_backward_compiled(xp, g, idx, in_shape, kernel, stride, padding, dilation)
        if compiled is not None:
            return compiled
        n, c, h, w = in_shape
        oh, ow = g.shape[2], g.shape[3]
        ph, pw = padding
        hp = max(h + 2 * ph, (oh - 1) * stride[0] + dilation[0] * (kernel[0] - 1) + 1)
        wp = max(w + 2 * pw, (ow - 1) * stride[1] + dilation[1] * (kernel[1] - 1) + 1)
        dtype = g.dtype
        g = upcast(g)
        buf = xp.zeros((n, c, hp, wp), dtype=g.dtype)
        k = 0
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                _window(xp, buf, i, j, oh, ow, stride, dilation)[...] += g * (idx == k)
                k += 1
        return rounded(xp.ascontiguousarray(buf[:, :, ph : ph + h, pw : pw + w]), dtype)


_max_pool2d_backward_op = register(MaxPool2dBackwardOp())


def _norm_pool_args(kernel_size, stride, padding, dilation):
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _pair(stride)
    return kernel, stride, _pair(padding), _pair(dilation)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over kernel windows; with return_indices also the flat (h*W + w) input positions."""
    refuse_bool("max_pool2d", input)
    kernel, stride, padding, dilation = _norm_pool_args(kernel_size, stride, padding, dilation)
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    values, local = apply(_max_pool2d_op, input, kernel=kernel, stride=stride, padding=padding,
                          dilation=dilation, ceil_mode=bool(ceil_mode))
    if squeeze:
        values = values.squeeze(0)
    if not return_indices:
        return values
    flat = _flat_indices(local, input.shape, kernel, stride, padding, dilation)
    return values, (flat.squeeze(0) if squeeze else flat)


def _flat_indices(local, in_shape, kernel, stride, padding, dilation):
    """Window-local argmax -> PyTorch's flat index into each input plane."""
    from ember.ops.creation_ops import arange_like

    oh, ow = local.shape[2], local.shape[3]
    ki = local // kernel[1]
    kj = local % kernel[1]
    rows = arange_like(local, np.arange(oh)).reshape(1, 1, oh, 1) * stride[0] - padding[0]
    cols = arange_like(local, np.arange(ow)).reshape(1, 1, 1, ow) * stride[1] - padding[1]
    h = rows + ki * dilation[0]
    w = cols + kj * dilation[1]
    return h * in_shape[3] + w


class AvgPool2dOp(Op):
    name = "avg_pool2d"
    fresh_output = True

    def infer(self, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        oh, ow = _geometry(self.name, x, kernel, stride, padding, (1, 1), ceil_mode)
        if x.dtype not in FLOAT_NP:
            raise DtypeError(f"avg_pool2d: input must be floating point, got {x.dtype}")
        return spec((x.shape[0], x.shape[1], oh, ow), x.dtype)

    def kernel(self, xp, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        self.infer(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
        oh, ow = _geometry(self.name, x, kernel, stride, padding, (1, 1), ceil_mode)
        if _global(x.shape, oh, ow, kernel, padding):  # one product with ones, not a pass per tap
            n, c, h, w = x.shape
            rows = xp.ascontiguousarray(upcast(x)).reshape(n * c, h * w)
            total = xp.matmul(rows, xp.ones(h * w, rows.dtype)).reshape(n, c, 1, 1)
            return (total / (divisor_override or h * w)).astype(x.dtype, copy=False)
        xpad = _padded(xp, upcast(x), padding, oh, ow, kernel, stride, (1, 1), 0)
        total = None
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                v = _window(xp, xpad, i, j, oh, ow, stride, (1, 1))
                total = v.copy() if total is None else total + v
        return (total / _divisor(xp, x.shape, oh, ow, kernel, stride, padding, count_include_pad,
                                 divisor_override, total.dtype)).astype(x.dtype, copy=False)

    def vjp(self, ctx, g):
        return (apply(_avg_pool2d_backward_op, g, in_shape=ctx.in_shape(0), **ctx.attrs),)


_avg_pool2d_op = register(AvgPool2dOp())


def _global(in_shape, oh, ow, kernel, padding) -> bool:
    """Whether the pooling is one window over each whole plane, unpadded: global average pooling (ResNet's and
    MobileNet's head). Its forward is then a product with a vector of ones and its backward one broadcast:
    (32, 64, 8, 8) went from 166 to 15 us forward, 178 to 31 us backward. (NumPy's sums over small inner axes
    run far slower than the per-tap passes that other windows take.)"""
    return (oh, ow) == (1, 1) and tuple(kernel) == tuple(in_shape[2:]) and not any(padding)


def _divisor(xp, in_shape, oh, ow, kernel, stride, padding, count_include_pad, divisor_override, dtype):
    """Per-window divisor (PyTorch's: padding counts if asked, the ceil_mode overhang never does)."""
    if divisor_override:
        return divisor_override
    h, w = in_shape[2], in_shape[3]
    ph, pw = padding

    def counts(size, o, k, s, p):
        starts = np.arange(o) * s - p
        ends = np.minimum(starts + k, size + p)
        if not count_include_pad:
            return np.minimum(ends, size) - np.maximum(starts, 0)
        return ends - starts

    ch = counts(h, oh, kernel[0], stride[0], ph)
    cw = counts(w, ow, kernel[1], stride[1], pw)
    div = np.outer(ch, cw).astype(dtype)
    return xp.asarray(div)


class AvgPool2dBackwardOp(Op):
    name = "avg_pool2d_backward"
    fresh_output = True

    def infer(self, g, in_shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        return spec(in_shape, g.dtype)

    def kernel(self, xp, g, in_shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        n, c, h, w = in_shape
        oh, ow = g.shape[2], g.shape[3]
        ph, pw = padding
        dtype = g.dtype
        g = upcast(g)
        gd = g / _divisor(xp, in_shape, oh, ow, kernel, stride, padding, count_include_pad, divisor_override, g.dtype)
        gd = gd.astype(g.dtype, copy=False)
        if _global(in_shape, oh, ow, kernel, padding):
            return rounded(xp.ascontiguousarray(xp.broadcast_to(gd, (n, c, h, w))), dtype)
        hp = max(h + 2 * ph, (oh - 1) * stride[0] + kernel[0])
        wp = max(w + 2 * pw, (ow - 1) * stride[1] + kernel[1])
        buf = xp.zeros((n, c, hp, wp), dtype=g.dtype)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                _window(xp, buf, i, j, oh, ow, stride, (1, 1))[...] += gd
        return rounded(xp.ascontiguousarray(buf[:, :, ph : ph + h, pw : pw + w]), dtype)

    def vjp(self, ctx, gg):
        a = {k: v for k, v in ctx.attrs.items() if k != "in_shape"}
        return (apply(_avg_pool2d_op, gg, **a),)


_avg_pool2d_backward_op = register(AvgPool2dBackwardOp())


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None):
    """Mean over kernel windows."""
    kernel, stride, padding, _ = _norm_pool_args(kernel_size, stride, padding, 1)
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    out = apply(_avg_pool2d_op, input, kernel=kernel, stride=stride, padding=padding, ceil_mode=bool(ceil_mode),
                count_include_pad=bool(count_include_pad), divisor_override=divisor_override)
    return out.squeeze(0) if squeeze else out


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size (PyTorch's start/end window rule)."""
    from ember.ops.reduction import mean
    from ember.ops.shape import cat

    oh, ow = _pair(output_size)
    h, w = input.shape[-2], input.shape[-1]
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(input, (h // oh, w // ow))
    rows = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, math.ceil((i + 1) * h / oh)
        cols = []
        for j in range(ow):
            w0, w1 = (j * w) // ow, math.ceil((j + 1) * w / ow)
            cols.append(mean(input[..., h0:h1, w0:w1], dim=(-2, -1), keepdim=True))
        rows.append(cat(cols, -1))
    return cat(rows, -2)
