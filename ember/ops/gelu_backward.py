"""GELU's gradient as one op: g * d gelu(x)/dx in a few in-place NumPy passes (one compiled pass for
float32 with the `jit` extra, kernels/gelu.py).

Written in tensor ops the exact GELU's gradient is about ten ops (erf, exp and the products), each
with its own dispatch and temporary; the NumPy path performs the same operations in the same order and
dtype (so its float32 and float64 results equal the composite's bit for bit) on two buffers. float16 and
bfloat16 are computed in float32 and rounded once. Under `create_graph=True` the composite rule in
elementwise.py is recorded instead, so higher derivatives exist.
"""

from __future__ import annotations

import math

from ember.errors import ShapeError, fmt_shape
from ember.kernels.gelu import gelu_backward_compiled
from ember.op import Op, register
from ember.ops._rules import spec
from ember.ops._special import erf
from ember.ops.opmath import rounded, upcast

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_K = math.sqrt(2.0 / math.pi)


class GeluBackwardOp(Op):
    """g * gelu'(x) for the exact GELU or its tanh approximation."""

    name = "gelu_backward"
    fresh_output = True
    differentiable = False  # under create_graph the composite rule is recorded instead

    def infer(self, g, x, approximate):
        if tuple(g.shape) != tuple(x.shape):
            raise ShapeError(f"gelu_backward: gradient {fmt_shape(g.shape)} and input {fmt_shape(x.shape)} differ")
        return spec(tuple(x.shape), x.dtype)

    def kernel(self, xp, g, x, approximate):
        dtype = x.dtype
        g, x = upcast(g).astype(upcast(x).dtype, copy=False), upcast(x)
        if approximate == "tanh":
            t = xp.tanh(_K * (x + 0.044715 * x * x * x))
            out = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _K * (1.0 + 3 * 0.044715 * x * x))
            return rounded(out, dtype)
        out = gelu_backward_compiled(xp, g, x)  # float32 with the jit extra: one compiled pass (kernels/gelu.py)
        if out is not None:
            return rounded(out, dtype)
        cdf = xp.asarray(erf(xp, x * _INV_SQRT_2))  # 0.5 * (1 + erf(x / sqrt 2)); 0-d results stay arrays
        cdf += 1.0
        cdf *= 0.5
        pdf = xp.asarray(xp.multiply(x, -0.5))  # exp(-x^2 / 2) / sqrt(2 pi), times x
        pdf *= x
        xp.exp(pdf, out=pdf)
        pdf *= _INV_SQRT_2PI
        pdf *= x
        cdf += pdf
        cdf *= g
        return rounded(cdf, dtype)


gelu_backward_op = register(GeluBackwardOp())
