"""Ops whose gradients follow TF1 where TF's and PyTorch's rules differ (at ties and kinks).

- maximum/minimum: TF gives the whole gradient of a tie to x (`x >= y` for maximum, `x <= y` for
  minimum); PyTorch splits it.
- relu6: TF's gradient is 0 at 0 and at 6 (it passes only where 0 < x < 6); PyTorch's clamp passes
  it at both ends.

The forward kernels are NumPy's (NaN-propagating, as TF's). Floor, round and ceil need no op
here: TF gives them no gradient at all (None), which `tf.floor` gets from `stop_gradient`.
"""

from __future__ import annotations

import ember as _em
from ember.ops.elementwise import Binary, Unary
from ember.ops.registry import register


def _tie_to_x(keeps):
    """TF's maximum/minimum rule: x gets g where keeps(x, y) holds, y gets it elsewhere."""

    def grad(ctx, g):
        x, y = ctx.input(0), ctx.input(1)
        mask = keeps(x, y)
        gx = _em.where(mask, g, 0.0) if ctx.needs_grad(0) else None
        gy = _em.where(mask, 0.0, g) if ctx.needs_grad(1) else None
        return gx, gy

    return grad


TF_MAXIMUM = register(Binary("tf_maximum", lambda xp, a, b: xp.maximum(a, b), _tie_to_x(_em.ge)))
TF_MINIMUM = register(Binary("tf_minimum", lambda xp, a, b: xp.minimum(a, b), _tie_to_x(_em.le)))
TF_MAXIMUM.elementwise = TF_MINIMUM.elementwise = False  # not in the fusion code generators' tables


def _relu6_grad(ctx, g):
    x = ctx.input(0)
    return _em.where(_em.logical_and(x > 0, x < 6), g, 0.0)


TF_RELU6 = register(Unary("tf_relu6", lambda xp, x: xp.minimum(xp.maximum(x, 0), 6).astype(x.dtype, copy=False),
                          _relu6_grad, float_only=False, save_input=True))
TF_RELU6.elementwise = False
