"""layer_norm's gradient as one op: (gx, gw, gb) from x, w, the saved mean and rstd, and gy.

Written in tensor ops the rule is about a dozen ops, each a pass over the activations with its own temporary (and
under ember.jit a fused region whose three full-size outputs cost more than the arithmetic). PyTorch has
native_layer_norm_backward for the same reason. The NumPy kernel follows the composite rule of nn_extra.py; the
compiled rows are ember.kernels.layer_norm's. Under `create_graph=True`, or when the statistics' own gradients are
needed, the composite rule is recorded instead, so higher derivatives exist.
"""

from __future__ import annotations

from ember.errors import ShapeError, fmt_shape
from ember.kernels import layer_norm
from ember.op import Op, register
from ember.ops._rules import spec
from ember.ops.opmath import opmath, rounded, upcast


class LayerNormBackwardOp(Op):
    """(gx, gw, gb) of layer_norm over the trailing `ndims` dims; gw and gb in the statistics' dtype."""

    name = "layer_norm_backward"
    n_outputs = 3
    fresh_output = True
    differentiable = False  # under create_graph the composite rule in nn_extra.py is recorded instead

    def infer(self, x, w, mean, rstd, gy, ndims):
        if tuple(gy.shape) != tuple(x.shape):
            raise ShapeError(f"layer_norm_backward: output gradient {fmt_shape(gy.shape)} does not match the input "
                             f"{fmt_shape(x.shape)}")
        tail = tuple(x.shape[len(x.shape) - ndims:])
        stat = opmath(x.dtype)
        return spec(tuple(x.shape), x.dtype), spec(tail, stat), spec(tail, stat)

    def kernel(self, xp, x, w, mean, rstd, gy, ndims):
        dtype = x.dtype
        fast = layer_norm.backward(xp, x, w, mean, rstd, gy, ndims)
        if fast is not None:
            return fast
        x, gy = upcast(x), upcast(gy).astype(upcast(x).dtype, copy=False)
        axes = tuple(range(x.ndim - ndims, x.ndim))
        batch = tuple(range(x.ndim - ndims))
        xhat = (x - mean) * rstd
        gw = (gy * xhat).sum(axis=batch)
        gb = gy.sum(axis=batch)
        gxhat = gy if w is None else gy * upcast(w).astype(x.dtype, copy=False)
        gx = gxhat - gxhat.mean(axis=axes, keepdims=True)
        gx -= xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= rstd
        return rounded(gx, dtype), xp.asarray(gw), xp.asarray(gb)


layer_norm_backward_op = register(LayerNormBackwardOp())
