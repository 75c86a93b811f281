"""Fused recurrent cells: one LSTM step (gates to new h and c) as one op, forward and backward.

A step written in elementwise ops costs about eleven dispatches forward and as many backward, per
time step; for the small hidden sizes of RNN work that overhead, not arithmetic, is the time.
`lstm_cell` computes h and c from the gate pre-activations (order [i, f, o, g]) in one kernel; its
gradient is the op `lstm_cell_backward` (one kernel too) when no graph of the backward pass is
being recorded. With `create_graph=True` the gradient is written in Ember ops instead, so every
order of derivative is available.
"""

from __future__ import annotations

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.errors import ShapeError, fmt_shape
from ember.ops._rules import FLOAT_NP, binary_dtype, spec
from ember.ops.dispatch import apply
from ember.ops.opmath import rounded, upcast
from ember.ops.registry import Op, register


def _gates(xp, pre, hidden: int):
    """(i, f, o, g) activated from pre-activations [i, f, o, g] (float32 or float64 arrays)."""
    act = np.empty_like(pre)
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative inputs: sigmoid is exactly 0
        xp.exp(np.negative(pre[..., :3 * hidden], out=act[..., :3 * hidden]), out=act[..., :3 * hidden])
    act[..., :3 * hidden] += 1.0
    xp.reciprocal(act[..., :3 * hidden], out=act[..., :3 * hidden])
    xp.tanh(pre[..., 3 * hidden:], out=act[..., 3 * hidden:])
    h = hidden
    return act[..., :h], act[..., h:2 * h], act[..., 2 * h:3 * h], act[..., 3 * h:]


def _check(pre, c, what: str):
    if len(pre.shape) < 1 or len(c.shape) != len(pre.shape) or tuple(pre.shape[:-1]) != tuple(c.shape[:-1]) \
            or pre.shape[-1] != 4 * c.shape[-1]:
        raise ShapeError(f"{what}: expected gates of shape (..., 4*H) and a cell state (..., H), got "
                         f"{fmt_shape(pre.shape)} and {fmt_shape(c.shape)}")
    if pre.dtype not in FLOAT_NP or c.dtype not in FLOAT_NP:
        raise TypeError(f"{what}: expected floating-point tensors, got {pre.dtype} and {c.dtype}")


class LSTMCellOp(Op):
    """(h, c') = (o * tanh(c'), f * c + i * g) with i, f, o = sigmoid(...) and g = tanh(...) of `pre`."""

    name = "lstm_cell"
    n_outputs = 2
    fresh_output = True
    save_inputs = (0, 1)

    def infer(self, pre, c):
        _check(pre, c, self.name)
        dtype = binary_dtype(pre, c)
        return spec(tuple(c.shape), dtype), spec(tuple(c.shape), dtype)

    def kernel(self, xp, pre, c):
        dtype = binary_dtype(pre, c)
        pre, c = upcast(pre), upcast(c)
        if pre.dtype != c.dtype:
            common = np.promote_types(pre.dtype, c.dtype)
            pre, c = pre.astype(common), c.astype(common)
        i, f, o, g = _gates(xp, pre, c.shape[-1])
        c_new = f * c
        c_new += i * g
        h = xp.tanh(c_new)
        h *= o
        return rounded(h, dtype), rounded(c_new, dtype)

    def vjp(self, ctx, gh, gc):
        pre, c = ctx.input(0), ctx.input(1)
        if grad_state.enabled:  # create_graph: a gradient made of differentiable ops
            return _lstm_cell_vjp_in_ops(pre, c, gh, gc)
        return apply(_lstm_cell_backward_op, pre, c, gh, gc)


class LSTMCellBackwardOp(Op):
    """Gradients (of pre, of c) of lstm_cell from those of (h, c'); either may be None (zero)."""

    name = "lstm_cell_backward"
    n_outputs = 2
    fresh_output = True
    differentiable = False  # under create_graph the ops of _lstm_cell_vjp_in_ops are recorded instead

    def infer(self, pre, c, gh, gc):
        _check(pre, c, self.name)
        return spec(tuple(pre.shape), pre.dtype), spec(tuple(c.shape), c.dtype)

    def kernel(self, xp, pre, c, gh, gc):
        pre_dtype, c_dtype = pre.dtype, c.dtype
        pre, c = upcast(pre), upcast(c)
        common = np.promote_types(pre.dtype, c.dtype)
        pre, c = pre.astype(common, copy=False), c.astype(common, copy=False)
        hidden = c.shape[-1]
        i, f, o, g = _gates(xp, pre, hidden)
        tc = xp.tanh(f * c + i * g)
        dc = np.zeros_like(c) if gc is None else upcast(gc).astype(common, copy=True)
        dpre = np.empty_like(pre)
        if gh is not None:
            gh = upcast(gh).astype(common, copy=False)
            dc += gh * o * (1.0 - tc * tc)
            np.multiply(gh * tc, o * (1.0 - o), out=dpre[..., 2 * hidden:3 * hidden])
        else:
            dpre[..., 2 * hidden:3 * hidden] = 0.0
        np.multiply(dc * g, i * (1.0 - i), out=dpre[..., :hidden])
        np.multiply(dc * c, f * (1.0 - f), out=dpre[..., hidden:2 * hidden])
        np.multiply(dc * i, 1.0 - g * g, out=dpre[..., 3 * hidden:])
        dc *= f
        return rounded(dpre, pre_dtype), rounded(dc, c_dtype)


_lstm_cell_op = register(LSTMCellOp())
_lstm_cell_backward_op = register(LSTMCellBackwardOp())


def _lstm_cell_vjp_in_ops(pre, c, gh, gc):
    """lstm_cell's gradient written in Ember ops (recorded, so it can be differentiated again)."""
    from ember.ops.elementwise import sigmoid, tanh
    from ember.ops.shape import cat
    from ember.ops.split import split

    hidden = c.shape[-1]
    ifo, g_pre = split(pre, (3 * hidden, hidden), -1)
    i, f, o = split(sigmoid(ifo), hidden, -1)
    g = tanh(g_pre)
    tc = tanh(f * c + i * g)
    dc = gc
    do = None
    if gh is not None:
        via_h = gh * o * (1.0 - tc * tc)
        dc = via_h if dc is None else dc + via_h
        do = gh * tc
    if dc is None:
        dc = c * 0.0
    if do is None:
        do = o * 0.0
    dpre = cat([dc * g * (i * (1.0 - i)), dc * c * (f * (1.0 - f)), do * (o * (1.0 - o)), dc * i * (1.0 - g * g)], -1)
    return dpre, dc * f


def lstm_cell(pre, c):
    """(h, c') of one LSTM step from gate pre-activations [i, f, o, g] (..., 4H) and the cell state (..., H)."""
    return apply(_lstm_cell_op, pre, c)
