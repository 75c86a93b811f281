"""A convolution with a per-channel affine (an eval batch norm) and activation applied as its output is written:
the compiled depthwise kernel's epilogue, or Ember's GEMM's for a pointwise convolution (on each chunk's rows while
they are in cache), so the activations are written once instead of written, read and written again.
"""

from __future__ import annotations

from ember.kernels.conv import _out_hw, depthwise, pointwise_on_driver, pointwise_on_ember_gemm, pointwise_takes_batch
from ember.kernels.selection import Algorithm, algorithms, always, note

algorithms("conv2d_affine", [
    Algorithm("depthwise compiled with epilogue", "a depthwise convolution, one dtype throughout, Numba", None),
    Algorithm("pointwise GEMM with epilogue", "a float32 1x1 convolution conv2d runs as a GEMM on its input and on "
              "Ember's GEMM driver (conv.pointwise_on_driver): sgemm's affine epilogue", None),
    Algorithm("conv2d, then channel_affine", "otherwise: the two ops' own kernels", always),
])


def conv2d_affine(xp, x, w, scale, shift, stride, padding, dilation, groups, activation):
    """conv2d(x, w) * scale[c] + shift[c] through `activation` in one kernel, or None where neither epilogue runs
    (the op then runs conv2d's kernel and channel_affine's)."""
    if not x.dtype == w.dtype == scale.dtype == shift.dtype:
        return None
    if groups > 1 and w.shape[1] == 1:
        oh, ow = _out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation)
        out = depthwise.forward(xp, x, w, stride, padding, dilation, oh, ow, (scale, shift, activation))
        if out is not None:
            note("conv2d_affine", "depthwise compiled with epilogue")
        return out
    if pointwise_takes_batch(x, w, stride, padding) and pointwise_on_driver(x, w, groups):
        out = pointwise_on_ember_gemm(x, w, (scale, shift, activation))
        if out is not None:
            note("conv2d_affine", "pointwise GEMM with epilogue")
        return out
    return None
