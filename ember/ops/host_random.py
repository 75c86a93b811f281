"""`host_random`: random draws made inside a traced function, drawn afresh at every run.

Eager factories (`ember.rand`, `randn`, `randint`, `bernoulli`, `Tensor.normal_`, dropout masks)
describe a draw as a function of a NumPy-style generator. While ember.jit traces, they become this
op instead of an array, so the compiled graph draws new numbers each time it runs rather than
replaying the numbers seen at trace time.
"""

from __future__ import annotations

import numpy as np

from ember.op import Op, register
from ember.ops._rules import spec


class HostRandomOp(Op):
    name = "host_random"
    differentiable = False
    stateful = True  # a new draw per run: never merged, folded or pruned as a pure value

    def infer(self, draw, shape, dtype, generator=None):
        return spec(tuple(shape), dtype)

    def kernel(self, xp, draw, shape, dtype, generator=None):
        from ember.random import host_rng

        arr = np.asarray(draw(host_rng(generator), tuple(shape))).astype(dtype, copy=False)
        return arr if xp is np else xp.asarray(arr)


_host_random_op = register(HostRandomOp())
