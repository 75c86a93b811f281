"""2-D convolution (NCHW) and its transpose as ops: their shape rules and gradient rules; how each is computed
on this machine is ember.kernels.conv's choice.

conv2d's input gradient is conv_transpose2d and its weight gradient is conv2d_weight_grad, so
every gradient rule is itself an Ember op (and second derivatives work). float16/bfloat16 operands
are multiplied and summed in float32 and each result is rounded once.
"""

from __future__ import annotations

from ember.dispatch import apply
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.kernels import conv as conv_kernels
from ember.op import Op, register
from ember.ops._rules import binary_dtype, refuse_bool, refuse_mixed, spec
from ember.ops.channel_affine import channel_affine
from ember.ops.opmath import rounded, upcast


def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2:
        raise ValueError(f"conv2d: {name} must be an int or a pair, got {v}")
    return v


def conv_out_size(size, k, stride, pad_lo, pad_hi, dil):
    """Output length of a convolution along one dim."""
    if size is None:
        return None
    return (size + pad_lo + pad_hi - dil * (k - 1) - 1) // stride + 1


def _check_conv(op, x, w, stride, pad, dil, groups, transposed=False):
    refuse_mixed(op, ("input", "weight"), x, w)  # PyTorch: "expected scalar type Float but found Double"
    if len(x.shape) != 4:
        raise ShapeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {fmt_shape(x.shape)}")
    if len(w.shape) != 4:
        raise ShapeError(f"{op}: expected a 4-D weight, got shape {fmt_shape(w.shape)}")
    if groups < 1:
        raise ValueError(f"{op}: groups must be positive, got {groups}")
    c = x.shape[1]
    if transposed:
        if w.shape[0] != c:
            raise ShapeError(
                f"{op}: input {fmt_shape(x.shape)} has {c} channels but weight {fmt_shape(w.shape)} expects {w.shape[0]}"
            )
    else:
        if c is not None and c != w.shape[1] * groups:
            raise ShapeError(
                f"{op}: input {fmt_shape(x.shape)} has {c} channels, but weight {fmt_shape(w.shape)} with "
                f"groups={groups} expects {w.shape[1] * groups}"
            )
        if w.shape[0] % groups:
            raise ShapeError(f"{op}: out_channels {w.shape[0]} is not divisible by groups={groups}")
    for s in stride:
        if s < 1:
            raise ValueError(f"{op}: stride must be positive, got {stride}")
    for d in dil:
        if d < 1:
            raise ValueError(f"{op}: dilation must be positive, got {dil}")


class Conv2dOp(Op):
    name = "conv2d"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}

    def infer(self, x, w, stride, padding, dilation, groups):
        _check_conv(self.name, x, w, stride, padding, dilation, groups)
        n, _, h, wd = x.shape
        kh, kw = w.shape[2], w.shape[3]
        oh = conv_out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        ow = conv_out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        if (oh is not None and oh <= 0) or (ow is not None and ow <= 0):
            raise ShapeError(
                f"conv2d: input {fmt_shape(x.shape)} (padded by {padding}) is smaller than the dilated "
                f"kernel {fmt_shape(w.shape[2:])}"
            )
        return spec((n, w.shape[0], oh, ow), x.dtype)

    def kernel(self, xp, x, w, stride, padding, dilation, groups):
        dtype = self.infer(x, w, stride, padding, dilation, groups).dtype
        x, w = upcast(x.astype(dtype, copy=False)), upcast(w.astype(dtype, copy=False))
        return rounded(conv_kernels.conv2d(xp, x, w, stride, padding, dilation, groups), dtype)

    def vjp(self, ctx, g):
        return _conv_vjp(ctx, g, transposed=False)


_conv2d_op = register(Conv2dOp())


class ConvTranspose2dOp(Op):
    """The adjoint of conv2d w.r.t. its input; weight is (C_in, C_out/groups, kh, kw)."""

    name = "conv_transpose2d"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}

    def infer(self, x, w, stride, padding, dilation, groups, out_hw):
        _check_conv(self.name, x, w, stride, padding, dilation, groups, transposed=True)
        if x.shape[1] is not None and x.shape[1] % groups:
            raise ShapeError(f"{self.name}: input channels {x.shape[1]} not divisible by groups={groups}")
        return spec((x.shape[0], w.shape[1] * groups) + tuple(out_hw), x.dtype)

    def kernel(self, xp, x, w, stride, padding, dilation, groups, out_hw):
        dtype = self.infer(x, w, stride, padding, dilation, groups, out_hw).dtype
        x, w = upcast(x.astype(dtype, copy=False)), upcast(w.astype(dtype, copy=False))
        return rounded(conv_kernels.conv_transpose2d(xp, x, w, stride, padding, dilation, groups, out_hw), dtype)

    def vjp(self, ctx, g):
        return _conv_vjp(ctx, g, transposed=True)


_conv_transpose2d_op = register(ConvTranspose2dOp())


def _trim_for(image, out_hw, kernel_hw, stride, padding, dilation, groups):
    """image and padding trimmed so that a convolution over them has exactly out_hw positions.

    conv_transpose2d's output_padding adds rows and columns that no input position reaches; a
    convolution over that output (its gradients) would otherwise yield extra positions.
    """
    pad = list(padding)
    hw = list(image.shape[2:])
    for d in range(2):
        need = (out_hw[d] - 1) * stride[d] + dilation[d] * (kernel_hw[d] - 1) + 1
        cut = hw[d] + pad[2 * d] + pad[2 * d + 1] - need
        if cut > 0:
            from_pad = min(cut, pad[2 * d + 1])
            pad[2 * d + 1] -= from_pad
            hw[d] -= cut - from_pad
    if tuple(hw) != tuple(image.shape[2:]):
        image = image[:, :, : hw[0], : hw[1]]
    return image, tuple(pad)


def _conv_vjp(ctx, g, transposed: bool):
    """Gradients of conv2d and of its adjoint conv_transpose2d, each the other's mirror image: the
    input's through the other op, the weight's by correlating image and gradient (whose roles swap)."""
    a = ctx.attrs
    conv = {"stride": a["stride"], "padding": a["padding"], "dilation": a["dilation"], "groups": a["groups"]}
    gx = gw = None
    if transposed:
        g, conv["padding"] = _trim_for(g, tuple(ctx.in_shape(0)[2:]), tuple(ctx.in_shape(1)[2:]), **conv)
    if ctx.needs_grad(0):
        if transposed:
            gx = apply(_conv2d_op, g, ctx.input(1), **conv)
        else:
            gx = apply(_conv_transpose2d_op, g, ctx.input(1), **conv, out_hw=tuple(ctx.in_shape(0)[2:]))
    if ctx.needs_grad(1):
        x = ctx.input(0)
        image, grad = (g, x) if transposed else (x, g)
        gw = apply(_conv2d_weight_grad_op, image, grad, **conv, kernel_hw=tuple(ctx.in_shape(1)[2:]))
    return gx, gw


class Conv2dWeightGradOp(Op):
    """d conv2d / d weight: correlate the input with the output gradient."""

    name = "conv2d_weight_grad"
    fresh_output = True
    save_inputs = (0, 1)

    def infer(self, x, g, stride, padding, dilation, groups, kernel_hw):
        return spec((g.shape[1], x.shape[1] // groups) + tuple(kernel_hw), binary_dtype(x, g))

    def kernel(self, xp, x, g, stride, padding, dilation, groups, kernel_hw):
        dtype = binary_dtype(x, g)
        x, g = upcast(x.astype(dtype, copy=False)), upcast(g.astype(dtype, copy=False))
        return rounded(conv_kernels.conv2d_weight_grad(xp, x, g, stride, padding, dilation, groups, kernel_hw), dtype)

    def vjp(self, ctx, gg):
        x, g = ctx.input(0), ctx.input(1)
        a = ctx.attrs
        common = dict(stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
        gx = apply(_conv_transpose2d_op, g, gg, out_hw=tuple(x.shape[2:]), **common) if ctx.needs_grad(0) else None
        gg_out = apply(_conv2d_op, x, gg, **common) if ctx.needs_grad(1) else None
        return gx, gg_out


_conv2d_weight_grad_op = register(Conv2dWeightGradOp())


def _padding4(padding, kernel_hw, dilation, stride, op):
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            out = []
            for k, d in zip(kernel_hw, dilation):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return tuple(out)
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a pair, got {padding!r}")
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding}")
    return (ph, ph, pw, pw)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """2-D cross-correlation over NCHW input with an (out, in/groups, kh, kw) weight."""
    refuse_bool("conv2d", input, weight)
    if bias is not None:  # (the op's shape rule checks the input and weight)
        refuse_mixed("conv2d", ("input", "weight", "bias"), input, weight, bias)
    if len(weight.shape) != 4:
        raise ShapeError(f"conv2d: expected a 4-D weight, got shape {fmt_shape(weight.shape)}")
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pad = _padding4(padding, tuple(weight.shape[2:]), dilation, stride, "conv2d")
    out = apply(_conv2d_op, input, weight, stride=stride, padding=pad, dilation=dilation, groups=int(groups))
    if bias is not None:
        if tuple(bias.shape) != (weight.shape[0],):
            raise ShapeError(f"conv2d: bias must have shape ({weight.shape[0]},), got {fmt_shape(bias.shape)}")
        out = channel_affine(out, None, bias)  # one pass, and its gradient one per-channel sum
    return out.squeeze(0) if squeeze else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """Transposed 2-D convolution (the gradient of conv2d w.r.t. its input)."""
    refuse_bool("conv_transpose2d", input, weight)
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    if input.ndim != 4 or weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d: expected 4-D input and weight, got {fmt_shape(input.shape)} and {fmt_shape(weight.shape)}"
        )
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    ph, pw = _pair(padding, "padding")
    oph, opw = _pair(output_padding, "output_padding")
    if oph >= max(stride[0], dilation[0]) or opw >= max(stride[1], dilation[1]):
        raise ValueError(f"conv_transpose2d: output_padding {output_padding} must be smaller than stride or dilation")
    kh, kw = weight.shape[2], weight.shape[3]
    h, w = input.shape[2], input.shape[3]
    out_hw = (
        (h - 1) * stride[0] - 2 * ph + dilation[0] * (kh - 1) + oph + 1,
        (w - 1) * stride[1] - 2 * pw + dilation[1] * (kw - 1) + opw + 1,
    )
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise ShapeError(f"conv_transpose2d: the output size {out_hw} is not positive for input {fmt_shape(input.shape)}")
    out = apply(_conv_transpose2d_op, input, weight, stride=stride, padding=(ph, ph, pw, pw), dilation=dilation,
                groups=int(groups), out_hw=out_hw)
    if bias is not None:
        if tuple(bias.shape) != (weight.shape[1] * int(groups),):
            raise ShapeError(f"conv_transpose2d: bias must have shape ({weight.shape[1] * int(groups)},), "
                             f"got {fmt_shape(bias.shape)}")
        if bias.dtype is not out.dtype:  # PyTorch adds another dtype's bias in place, in the output's dtype
            if bias.dtype.is_floating_point and not out.dtype.is_floating_point:
                raise DtypeError(f"conv_transpose2d: cannot add a {bias.dtype.name} bias to the {out.dtype.name} "
                                 f"output")
            bias = bias.to(out.dtype)
        out = channel_affine(out, None, bias)
    return out.squeeze(0) if squeeze else out
