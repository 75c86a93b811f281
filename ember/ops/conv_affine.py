"""A convolution followed by a per-channel affine (an eval batch norm) and its activation, as one op.

Only the jit makes it (graph/passes/fold_activation.py), after autodiff, where a depthwise or pointwise `conv2d`'s
output is read by a channel_affine alone: the compiled depthwise kernel, or Ember's GEMM for a pointwise convolution
(sgemm's `affine` epilogue, on each chunk's rows while they are in cache), applies the scale, shift and activation
as it writes the output, so the activations are written once instead of written and then read and written again
(MobileNetV2 has seventeen depthwise and thirty-four pointwise layers followed by a batch norm). Its
values are conv2d's followed by channel_affine's: the kernels round the same way, and where they do not run the two
ops' own kernels do.
"""

from __future__ import annotations

import numpy as np

from ember.ops import depthwise_compiled, gemm
from ember.ops.channel_affine import _channel_affine_op
from ember.ops.conv import _conv2d_op, _out_hw, pointwise_takes_batch
from ember.ops.registry import Op, register


class Conv2dAffineOp(Op):
    """conv2d(x, w, stride, padding, dilation, groups) * scale[c] + shift[c], then `activation` (None, ("relu",) or
    ("clamp", lo, hi))."""

    name = "conv2d_affine"
    fresh_output = True
    differentiable = False  # made after autodiff, in graphs that already hold their backward

    def infer(self, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        conv = _conv2d_op.infer(x, w, stride, padding, dilation, groups)
        return _channel_affine_op.infer(conv, scale, shift, activation)

    def kernel(self, xp, x, w, scale, shift, stride, padding, dilation, groups, activation=None):
        if x.dtype == w.dtype == scale.dtype == shift.dtype:
            if groups > 1 and w.shape[1] == 1:
                oh, ow = _out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation)
                out = depthwise_compiled.forward(xp, x, w, stride, padding, dilation, oh, ow, (scale, shift, activation))
                if out is not None:
                    return out
            elif xp is np and x.dtype == np.float32 and groups == 1 and pointwise_takes_batch(x, w, stride, padding):
                out = _pointwise(x, w, scale, shift, activation)
                if out is not None:
                    return out
        conv = _conv2d_op.kernel(xp, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return _channel_affine_op.kernel(xp, conv, scale, shift, activation=activation)


def _pointwise(x, w, scale, shift, activation):
    """conv2d's pointwise product (a product per sample, the weight read in place) with the affine as its epilogue,
    or None where Ember's GEMM does not take it (conv2d's kernel would then run NumPy's)."""
    from ember.ops.sgemm_compiled import sgemm

    n, c, h, wd = x.shape
    o = w.shape[0]
    a = np.broadcast_to(w.reshape(o, c), (n, o, c))
    b = x.reshape(n, c, h * wd)
    out = np.empty((n, o, h * wd), np.float32)
    if not gemm.takes_own(a, b, out):
        return None
    return sgemm(a, b, out, affine=(scale, shift, activation)).reshape(n, o, h, wd)


_conv2d_affine_op = register(Conv2dAffineOp())
