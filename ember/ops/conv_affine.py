"""A convolution followed by a per-channel affine (an eval batch norm) and its activation, as one op.

Only the jit makes it (graph/passes/fold_activation.py), after autodiff, where a depthwise or pointwise `conv2d`'s
output is read by a channel_affine alone: where the compiled depthwise kernel or Ember's GEMM can apply the scale,
shift and activation as it writes the output (ember.kernels.conv.affine), the activations are written once instead
of written and then read and written again (MobileNetV2 has seventeen depthwise and thirty-four pointwise layers
followed by a batch norm). Its values are conv2d's followed by channel_affine's: the kernels round the same way, and
where they do not run the two ops' own kernels do.
"""

from __future__ import annotations

from ember.kernels.conv import affine
from ember.op import Op, register
from ember.ops.channel_affine import _channel_affine_op
from ember.ops.conv import _conv2d_op


class Conv2dAffineOp(Op):
    """conv2d(x, w, stride, padding, dilation, groups) * scale[c] + shift[c], then `activation` (None, ("relu",) or
    ("clamp", lo, hi))."""

    name = "conv2d_affine"
    fresh_output = True
    differentiable = False  # made after autodiff, in graphs that already hold their backward

    def infer(self, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        conv = _conv2d_op.infer(x, w, stride, padding, dilation, groups)
        return _channel_affine_op.infer(conv, scale, shift, activation=activation)

    def kernel(self, xp, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        out = affine.conv2d_affine(xp, x, w, scale, shift, stride, padding, dilation, groups, activation)
        if out is not None:
            return out
        conv = _conv2d_op.kernel(xp, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return _channel_affine_op.kernel(xp, conv, scale, shift, activation=activation)


_conv2d_affine_op = register(Conv2dAffineOp())
