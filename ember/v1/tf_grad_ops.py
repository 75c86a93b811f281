"""Ops whose gradients follow TF1 where TF's and PyTorch's rules differ (at ties and kinks).

- maximum/minimum: TF gives the whole gradient of a tie to x (`x >= y` for maximum, `x <= y` for
  minimum); PyTorch splits it.
- relu6: TF's gradient is 0 at 0 and at 6 (it passes only where 0 < x < 6); PyTorch's clamp passes
  it at both ends.

The forward kernels are NumPy's (NaN-propagating, as TF's). Floor, round and ceil need no op
here: TF gives them no gradient at all (None), which `tf.floor` gets from `stop_gradient`.
"""

from __future__ import annotations

import numpy as np

from ember import ops
from ember.op import Op, register
from ember.ops._rules import binary_dtype, broadcast_shapes, shape_of, spec


class _TieToXOp(Op):
    """max or min of x and y with broadcasting; a tie's gradient goes to x."""

    save_inputs = (0, 1)
    np_fn = ""  # the NumPy function computing it

    def infer(self, x, y):
        return spec(broadcast_shapes(self.name, shape_of(x), shape_of(y)), binary_dtype(x, y))

    def kernel(self, xp, x, y):
        dtype = binary_dtype(x, y)
        out = getattr(xp, self.np_fn)(x, y)
        return out if out.dtype == dtype else out.astype(dtype)

    def keeps_x(self, x, y):
        raise NotImplementedError

    def vjp(self, ctx, g):
        x, y = ctx.input(0), ctx.input(1)
        mask = self.keeps_x(x, y)
        gx = ops.where(mask, g, 0.0) if ctx.needs_grad(0) else None
        gy = ops.where(mask, 0.0, g) if ctx.needs_grad(1) else None
        return gx, gy


class TFMaximumOp(_TieToXOp):
    """The larger of x and y; x gets the gradient where x >= y."""

    name = "tf_maximum"
    np_fn = "maximum"

    def keeps_x(self, x, y):
        return ops.ge(x, y)


class TFMinimumOp(_TieToXOp):
    """The smaller of x and y; x gets the gradient where x <= y."""

    name = "tf_minimum"
    np_fn = "minimum"

    def keeps_x(self, x, y):
        return ops.le(x, y)


class TFRelu6Op(Op):
    """min(max(x, 0), 6); the gradient passes only where 0 < x < 6."""

    name = "tf_relu6"
    save_inputs = (0,)

    def infer(self, x):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x):
        return xp.minimum(xp.maximum(x, np.zeros((), x.dtype)), np.full((), 6, x.dtype))

    def vjp(self, ctx, g):
        x = ctx.input(0)
        return (ops.where(ops.logical_and(x > 0, x < 6), g, 0.0),)


tf_maximum_op = register(TFMaximumOp())
tf_minimum_op = register(TFMinimumOp())
tf_relu6_op = register(TFRelu6Op())
