"""Fused recurrent cells: one LSTM or GRU step as one op, forward and backward.

A step written in elementwise ops costs about eleven dispatches forward and as many backward, per
time step; for the small hidden sizes of RNN work that overhead, not arithmetic, is the time.
`lstm_cell` computes h and c from the gate pre-activations (PyTorch's order [i, f, g, o]) in one kernel, and
`gru_cell` h' from the input and hidden projections; their gradients are the ops `*_backward` (one
kernel each) when no graph of the backward pass is being recorded. With `create_graph=True` the gradient is written in Ember ops instead, so every
order of derivative is available.
"""

from __future__ import annotations

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, binary_dtype, spec
from ember.ops.opmath import rounded, upcast


def _gates(xp, pre, hidden: int):
    """(i, f, g, o) activated from pre-activations [i, f, g, o] (float32 or float64 arrays)."""
    act = activated_gates(xp, pre, hidden)
    h = hidden
    return act[..., :h], act[..., h:2 * h], act[..., 2 * h:3 * h], act[..., 3 * h:]


def _sigmoid_into(xp, pre, out) -> None:
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative inputs: sigmoid is exactly 0
        xp.exp(np.negative(pre, out=out), out=out)
    out += 1.0
    xp.reciprocal(out, out=out)


def activated_gates(xp, pre, hidden: int):
    """sigmoid of the [i, f] and [o] pre-activations and tanh of [g], as one array shaped like `pre`."""
    act = np.empty_like(pre)
    _sigmoid_into(xp, pre[..., :2 * hidden], act[..., :2 * hidden])
    _sigmoid_into(xp, pre[..., 3 * hidden:], act[..., 3 * hidden:])
    xp.tanh(pre[..., 2 * hidden:3 * hidden], out=act[..., 2 * hidden:3 * hidden])
    return act


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
        i, f, g, o = _gates(xp, pre, c.shape[-1])
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
        i, f, g, o = _gates(xp, pre, hidden)
        tc = xp.tanh(f * c + i * g)
        dc = np.zeros_like(c) if gc is None else upcast(gc).astype(common, copy=True)
        dpre = np.empty_like(pre)
        if gh is not None:
            gh = upcast(gh).astype(common, copy=False)
            dc += gh * o * (1.0 - tc * tc)
            np.multiply(gh * tc, o * (1.0 - o), out=dpre[..., 3 * hidden:])
        else:
            dpre[..., 3 * hidden:] = 0.0
        np.multiply(dc * g, i * (1.0 - i), out=dpre[..., :hidden])
        np.multiply(dc * c, f * (1.0 - f), out=dpre[..., hidden:2 * hidden])
        np.multiply(dc * i, 1.0 - g * g, out=dpre[..., 2 * hidden:3 * hidden])
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
    if_pre, g_pre, o_pre = split(pre, (2 * hidden, hidden, hidden), -1)
    i, f = split(sigmoid(if_pre), hidden, -1)
    g, o = tanh(g_pre), sigmoid(o_pre)
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
    dpre = cat([dc * g * (i * (1.0 - i)), dc * c * (f * (1.0 - f)), dc * i * (1.0 - g * g), do * (o * (1.0 - o))], -1)
    return dpre, dc * f


def lstm_cell(pre, c):
    """(h, c') of one LSTM step from gate pre-activations [i, f, g, o] (..., 4H, PyTorch's order) and the cell state
    (..., H)."""
    return apply(_lstm_cell_op, pre, c)


# --- GRU ----------------------------------------------------------------------------------------
def _check_gru(x_rz, x_n, gh, h, what: str):
    shapes = (tuple(x_rz.shape), tuple(x_n.shape), tuple(gh.shape), tuple(h.shape))
    hidden = h.shape[-1] if len(h.shape) else None
    lead = shapes[3][:-1]
    if hidden is None or any(len(s) != len(shapes[3]) or s[:-1] != lead for s in shapes) \
            or shapes[0][-1] != 2 * hidden or shapes[1][-1] != hidden or shapes[2][-1] != 3 * hidden:
        raise ShapeError(f"{what}: expected input projections (..., 2*H) and (..., H), a hidden projection (..., 3*H) "
                         f"and a state (..., H), got {', '.join(fmt_shape(s) for s in shapes)}")
    if any(t.dtype not in FLOAT_NP for t in (x_rz, x_n, gh, h)):
        raise TypeError(f"{what}: expected floating-point tensors")


def _gru_parts(xp, x_rz, x_n, gh, hidden: int):
    """(r, z, n) of one GRU step in float32/float64."""
    rz = x_rz + gh[..., :2 * hidden]
    with np.errstate(over="ignore"):
        xp.exp(np.negative(rz, out=rz), out=rz)
    rz += 1.0
    xp.reciprocal(rz, out=rz)
    r, z = rz[..., :hidden], rz[..., hidden:]
    n = xp.tanh(x_n + r * gh[..., 2 * hidden:])
    return r, z, n


def _common(*arrays):
    dtype = np.result_type(*(upcast(a).dtype for a in arrays))
    return [upcast(a).astype(dtype, copy=False) for a in arrays]


class GRUCellOp(Op):
    """h' = n + z * (h - n), r, z = sigmoid(x_rz + gh_rz), n = tanh(x_n + r * gh_n) (PyTorch's GRU step)."""

    name = "gru_cell"
    fresh_output = True
    # r, z and n read x_rz, x_n and gh; only the gradients of x_rz and gh (through z's) read h
    grad_reads = {0: (0, 1, 2, 3), 1: (0, 1, 2), 2: (0, 1, 2, 3), 3: (0, 2)}

    def infer(self, x_rz, x_n, gh, h):
        _check_gru(x_rz, x_n, gh, h, self.name)
        shape = tuple(h.shape)
        dtype = binary_dtype(spec(shape, binary_dtype(x_rz, x_n)), spec(shape, binary_dtype(gh, h)))
        return spec(shape, dtype)

    def kernel(self, xp, x_rz, x_n, gh, h):
        dtype = self.infer(x_rz, x_n, gh, h).dtype
        x_rz, x_n, gh, h = _common(x_rz, x_n, gh, h)
        _, z, n = _gru_parts(xp, x_rz, x_n, gh, h.shape[-1])
        out = h - n
        out *= z
        out += n
        return rounded(out, dtype)

    def vjp(self, ctx, g):
        x_rz, gh = ctx.input(0), ctx.input(2)
        if not (ctx.needs_grad(0) or ctx.needs_grad(1) or ctx.needs_grad(2)):  # only h's: g * z
            from ember.ops.elementwise import sigmoid

            hidden = gh.shape[-1] // 3
            z = sigmoid(x_rz[..., hidden:] + gh[..., hidden:2 * hidden])
            return None, None, None, g * z
        x_n = ctx.input(1)
        needs_h = ctx.needs_grad(0) or ctx.needs_grad(2)
        h = ctx.input(3) if needs_h else None
        if grad_state.enabled or not needs_h:  # create_graph (differentiable ops), or only x_n's and h's
            grads = _gru_cell_vjp_in_ops(x_rz, x_n, gh, h, g)
        else:
            grads = apply(_gru_cell_backward_op, x_rz, x_n, gh, h, g)
        return tuple(gr if ctx.needs_grad(i) else None for i, gr in enumerate(grads))


class GRUCellBackwardOp(Op):
    """Gradients of gru_cell's four inputs from the gradient of h'."""

    name = "gru_cell_backward"
    n_outputs = 4
    fresh_output = True
    differentiable = False  # under create_graph the ops of _gru_cell_vjp_in_ops are recorded instead

    def infer(self, x_rz, x_n, gh, h, g):
        _check_gru(x_rz, x_n, gh, h, self.name)
        return tuple(spec(tuple(t.shape), t.dtype) for t in (x_rz, x_n, gh, h))

    def kernel(self, xp, x_rz, x_n, gh, h, g):
        dtypes = [t.dtype for t in (x_rz, x_n, gh, h)]
        x_rz, x_n, gh, h, g = _common(x_rz, x_n, gh, h, g)
        hidden = h.shape[-1]
        r, z, n = _gru_parts(xp, x_rz, x_n, gh, hidden)
        dn_pre = g * (1.0 - z) * (1.0 - n * n)  # through n = tanh(x_n + r * gh_n)
        dgh = np.empty_like(gh)
        drz = dgh[..., :2 * hidden]
        np.multiply(dn_pre * gh[..., 2 * hidden:], r * (1.0 - r), out=drz[..., :hidden])
        np.multiply(g * (h - n), z * (1.0 - z), out=drz[..., hidden:])
        np.multiply(dn_pre, r, out=dgh[..., 2 * hidden:])
        d_xrz = drz.copy()
        return (rounded(d_xrz, dtypes[0]), rounded(dn_pre, dtypes[1]), rounded(dgh, dtypes[2]),
                rounded(g * z, dtypes[3]))


_gru_cell_op = register(GRUCellOp())
_gru_cell_backward_op = register(GRUCellBackwardOp())


def _gru_cell_vjp_in_ops(x_rz, x_n, gh, h, g):
    """gru_cell's gradient written in Ember ops (recorded, so it can be differentiated again); h None: only
    the gradients that do not read it (of x_n and of h)."""
    from ember.ops.elementwise import sigmoid, tanh
    from ember.ops.shape import cat
    from ember.ops.split import split

    hidden = x_n.shape[-1]
    gh_rz, gh_n = split(gh, (2 * hidden, hidden), -1)
    r, z = split(sigmoid(x_rz + gh_rz), hidden, -1)
    n = tanh(x_n + r * gh_n)
    dn_pre = g * (1.0 - z) * (1.0 - n * n)
    if h is None:  # only the gradients of x_n and h are wanted, and neither reads h
        return None, dn_pre, None, g * z
    drz = cat([dn_pre * gh_n * (r * (1.0 - r)), g * (h - n) * (z * (1.0 - z))], -1)
    return drz, dn_pre, cat([drz, dn_pre * r], -1), g * z


def gru_cell(x_rz, x_n, gh, h):
    """h' of one GRU step from the input projections (r|z, n), the hidden projection gh = W_hh h + b_hh and h."""
    return apply(_gru_cell_op, x_rz, x_n, gh, h)
