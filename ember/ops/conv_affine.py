"""A depthwise convolution followed by a per-channel affine (an eval batch norm) and its activation, as one op.

Only the jit makes it (graph/passes/fold_activation.py), after autodiff, where a depthwise conv2d's output is read
by a channel_affine alone: the compiled depthwise kernel applies the scale, shift and activation as it writes each
output, so the activations are written once instead of written and then read and written again (MobileNetV2 at
batch 1 has seventeen such layers). Its values are conv2d's followed by channel_affine's: the kernel rounds the
same way, and where it does not run the two ops' own kernels do.
"""

from __future__ import annotations

from ember.ops import depthwise_compiled
from ember.ops.channel_affine import _channel_affine_op
from ember.ops.conv import _conv2d_op, _out_hw
from ember.ops.registry import Op, register


class DepthwiseConv2dAffineOp(Op):
    """conv2d(x, w, stride, padding, dilation, groups) * scale[c] + shift[c], then `activation` (None, ("relu",) or
    ("clamp", lo, hi)); w has one input channel per group."""

    name = "depthwise_conv2d_affine"
    fresh_output = True
    differentiable = False  # made after autodiff, in graphs that already hold their backward

    def infer(self, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        conv = _conv2d_op.infer(x, w, stride, padding, dilation, groups)
        return _channel_affine_op.infer(conv, scale, shift, activation)

    def kernel(self, xp, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        if groups > 1 and w.shape[1] == 1 and x.dtype == w.dtype == scale.dtype == shift.dtype:
            oh, ow = _out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation)
            out = depthwise_compiled.forward(xp, x, w, stride, padding, dilation, oh, ow, (scale, shift, activation))
            if out is not None:
                return out
        conv = _conv2d_op.kernel(xp, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return _channel_affine_op.kernel(xp, conv, scale, shift, activation=activation)


_depthwise_conv2d_affine_op = register(DepthwiseConv2dAffineOp())
