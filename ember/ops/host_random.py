"""`host_random`: random draws made inside a traced function, drawn afresh at every run.

Eager factories (`ember.rand`, `randn`, `randint`, `bernoulli`, `Tensor.normal_`, dropout masks)
describe a draw as a function of an `ember.Generator` (PyTorch's CPU streams). While ember.jit traces, they become this
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

    def infer(self, *like, draw, shape, dtype, generator=None):
        return spec(tuple(shape), dtype)

    def kernel(self, xp, *like, draw, shape, dtype, generator=None):
        from ember.random import host_rng

        arr = draw_in_order(draw, host_rng(generator), tuple(shape), like[0] if like else None)
        arr = np.asarray(arr).astype(dtype, copy=False)
        return arr if xp is np else xp.asarray(arr)


def draw_in_order(draw, gen, shape: tuple, like=None):
    """draw(gen, shape), its values laid out in `like`'s memory order when `like` (an array of that shape) is
    strided: PyTorch draws into empty_like(x), which keeps x's strides, and fills it in memory order."""
    from ember.random.sampling import memory_axes

    if like is None or not isinstance(like, np.ndarray) or like.flags.c_contiguous or like.ndim < 2:
        return draw(gen, shape)
    order = memory_axes(like)
    values = np.asarray(draw(gen, tuple(shape[d] for d in order)))
    return values.transpose(np.argsort(order))


_host_random_op = register(HostRandomOp())
