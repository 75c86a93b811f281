"""A whole GRU layer over a sequence as one op, forward and backward (what cuDNN and oneDNN run).

`gru_cell` makes each time step one op, plus the hidden projection's GEMM and bias add, each an autograd
node, and backward the same again. `gru_layer` runs the recurrence in one kernel from the input projections
of every step (computed outside as one GEMM, the input bias folded in), and its gradient,
`gru_layer_backward`, walks the steps back once: per step the cell's elementwise rule and one GEMM for the
hidden state's gradient, then the hidden weight's and bias's gradients for all steps as one GEMM and one sum.
The forward keeps what that walk reads (the activated gates r, z, n and the hidden projection's n part
W_hn h + b_hn) as extra outputs, as cuDNN keeps its reserve space. `gru_layer` returns only the states.
With `create_graph=True` the gradient is written in Ember ops (step by step, through `gru_cell`), so every
order of derivative exists. Gates are in PyTorch's order [r, z, n].
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.kernels import gemm
from ember.kernels.gru import GRU
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, spec
from ember.ops.opmath import opmath, rounded, upcast


def _check(xw, h0, w_hh, b_hh, what: str, dtypes: bool = True):
    arrays = (xw, h0, w_hh) if b_hh is None else (xw, h0, w_hh, b_hh)
    shapes = ", ".join(fmt_shape(a.shape) for a in arrays)
    if len(xw.shape) != 3 or len(h0.shape) != 2 or len(w_hh.shape) != 2 or (b_hh is not None and len(b_hh.shape) != 1):
        raise ShapeError(f"{what}: expected input projections (T, N, 3*H), a state (N, H), a weight (3*H, H) and "
                         f"a bias (3*H,) or None, got {shapes}")
    t, n, g = xw.shape
    hidden = h0.shape[1]
    if tuple(h0.shape) != (n, hidden) or g != 3 * hidden or tuple(w_hh.shape) != (3 * hidden, hidden) \
            or (b_hh is not None and tuple(b_hh.shape) != (3 * hidden,)):
        raise ShapeError(f"{what}: shapes do not agree: input projections, h0, weight, bias: {shapes}")
    found = {np.dtype(a.dtype) for a in arrays}
    if dtypes and (len(found) != 1 or not found <= FLOAT_NP):
        raise TypeError(f"{what}: expected floating-point tensors of one dtype, got "
                        f"{', '.join(str(a.dtype) for a in arrays)}")


class GRULayerOp(Op):
    """(hs, gates, ghn, h_T) from (xw, h0, w_hh, b_hh): every step's state (T, N, H), for the gradient every
    step's activated gates r, z, n (T, N, 3H) and hidden projection's n part (T, N, H), those two in the
    compute dtype (float32 for float16/bfloat16), and the last state as an output of its own (whose gradient
    enters the backward as the last step's, as lstm_layer's h_T). b_hh may be None (a layer without biases)."""

    name = "gru_layer"
    n_outputs = 4
    fresh_output = True
    save_inputs = (0, 1, 2, 3)
    save_outputs = (0, 1, 2)

    def infer(self, xw, h0, w_hh, b_hh):
        _check(xw, h0, w_hh, b_hh, self.name)
        steps, state = xw.shape[0], tuple(h0.shape)
        work = opmath(xw.dtype)
        return (spec((steps,) + state, xw.dtype), spec(tuple(xw.shape), work), spec((steps,) + state, work),
                spec(state, xw.dtype))

    def kernel(self, xp, xw, h0, w_hh, b_hh):
        _check(xw, h0, w_hh, b_hh, self.name)  # eager calls run the kernel without infer
        dtype = xw.dtype  # float16/bfloat16: computed in float32, the states rounded once
        xw, h0, w_hh = (upcast(a) for a in (xw, h0, w_hh))
        b = xp.zeros(w_hh.shape[0], xw.dtype) if b_hh is None else xp.ascontiguousarray(upcast(b_hh))
        steps, batch, three_h = xw.shape
        hs = xp.empty((steps,) + h0.shape, xw.dtype)
        gates = xp.empty(xw.shape, xw.dtype)
        ghn = xp.empty(hs.shape, xw.dtype)
        pre = xp.empty(xw.shape[1:], xw.dtype)
        w_t = xp.ascontiguousarray(w_hh.T)  # BLAS runs these small products faster on a contiguous operand
        h0 = xp.ascontiguousarray(h0)
        loop = GRU.forward_loop(xp, xw.dtype, xw.size)
        if loop is not None:  # the whole time loop compiled, its GEMMs NumPy's BLAS called from inside
            batch_major = not xw.flags.c_contiguous and xw.transpose(1, 0, 2).flags.c_contiguous
            xs = xw.transpose(1, 0, 2) if batch_major else xp.ascontiguousarray(xw)
            args = (xs, batch_major, h0, w_t, GRU.packed(w_t), b, hs, gates, ghn, pre)
            GRU.run_loop(self.name, loop, args, batch, 2.0 * xw.size * (three_h // 3))
            return _outputs(xp, hs, gates, ghn, h0, dtype)
        step = GRU.noted_steps(self.name, GRU.step_forward(xp, xw.dtype, xw.size))
        h = h0
        for t in range(steps):
            xp.matmul(h, w_t, out=pre)
            if step is not None:  # xw may be strided (a batch-first input's projections): the kernel reads any
                step(xw[t], pre, b, h, gates[t], ghn[t], hs[t])
            else:
                _forward_step(xp, xw[t], pre, b, h, gates[t], ghn[t], hs[t])
            h = hs[t]
        return _outputs(xp, hs, gates, ghn, h0, dtype)

    def vjp(self, ctx, ghs, _gates, _ghn, gh):  # the kept gates are read only by this gradient
        xw, h0, w_hh, b_hh = (ctx.input(i) for i in range(4))
        if grad_state.enabled:  # create_graph: a gradient made of differentiable ops
            grads = _gru_layer_vjp_in_ops(xw, h0, w_hh, b_hh, ghs, gh)
        else:
            grads = apply(_gru_layer_backward_op, h0, w_hh, *(ctx.output_at(k) for k in range(3)), ghs, gh)
        return tuple(g if ctx.needs_grad(i) else None for i, g in enumerate(grads))


def _forward_step(xp, x, pre, b, h, act, ghn, h_new):
    """One step in NumPy (no Numba, or not float32): pre = h @ W_hh^T on entry; act, ghn and h_new filled."""
    hidden = h.shape[1]
    pre += b
    rz = act[:, :2 * hidden]
    xp.add(x[:, :2 * hidden], pre[:, :2 * hidden], out=rz)
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative inputs: sigmoid is 0
        xp.exp(xp.negative(rz, out=rz), out=rz)
    rz += 1.0
    xp.reciprocal(rz, out=rz)
    ghn[...] = pre[:, 2 * hidden:]
    n = act[:, 2 * hidden:]
    xp.multiply(act[:, :hidden], ghn, out=n)
    n += x[:, 2 * hidden:]
    xp.tanh(n, out=n)
    xp.subtract(h, n, out=h_new)
    h_new *= act[:, hidden:2 * hidden]
    h_new += n


class GRULayerBackwardOp(Op):
    """Gradients (of xw, h0, w_hh, b_hh) of gru_layer from its kept outputs and the gradients of hs and h_T
    (None: zero)."""

    name = "gru_layer_backward"
    n_outputs = 4
    fresh_output = True
    differentiable = False  # under create_graph the ops of _gru_layer_vjp_in_ops are recorded instead

    def infer(self, h0, w_hh, hs, gates, ghn, ghs, gh=None):
        _check(gates, h0, w_hh, None, self.name, dtypes=False)  # the kept gates are in the compute dtype
        return (spec(tuple(gates.shape), h0.dtype), spec(tuple(h0.shape), h0.dtype),
                spec(tuple(w_hh.shape), h0.dtype), spec((w_hh.shape[0],), h0.dtype))

    def kernel(self, xp, h0, w_hh, hs, gates, ghn, ghs, gh=None):
        dtype = h0.dtype
        work = gates.dtype
        h0, w_hh, hs = (xp.ascontiguousarray(upcast(a).astype(work, copy=False)) for a in (h0, w_hh, hs))
        has_ghs = ghs is not None
        ghs = xp.zeros((1,) + h0.shape, work) if ghs is None else xp.ascontiguousarray(upcast(ghs), dtype=work)
        gates, ghn = xp.ascontiguousarray(gates), xp.ascontiguousarray(ghn)
        dxw = xp.empty(gates.shape, work)
        dgh = xp.empty(gates.shape, work)
        dz, dw, dh = (xp.zeros(h0.shape, work) for _ in range(3))  # the state's gradient is dz + dw
        if gh is not None:  # the last state's own gradient: the last step's incoming one, through dz
            dz[...] = upcast(gh)
        loop = GRU.backward_loop(xp, work, gates.size)
        if loop is not None:  # the whole time loop compiled, its GEMMs NumPy's BLAS called from inside
            args = (ghs, has_ghs, w_hh, GRU.packed(w_hh), h0, hs, gates, ghn, dxw, dgh, dz, dw, dh)
            GRU.run_loop(self.name, loop, args, h0.shape[0], 2.0 * gates.size * h0.shape[1])
        else:
            step = GRU.noted_steps(self.name, GRU.step_backward(xp, work, gates.size))
            run = step if step is not None else partial(_backward_step, xp)
            for t in range(gates.shape[0] - 1, -1, -1):
                run(dz, dw, ghs[t if has_ghs else 0], has_ghs, gates[t], ghn[t], h0 if t == 0 else hs[t - 1], dh,
                    dxw[t], dgh[t])
                xp.matmul(dgh[t], w_hh, out=dw)
        # every step's share of the weight's gradient as one GEMM: sum_t dgh_t^T @ h_{t-1}
        h_prev = xp.concatenate([h0[None], hs[:-1]]).reshape(-1, h0.shape[1])
        d_w = gemm.matmul(dgh.reshape(-1, gates.shape[2]).T, h_prev, xp=xp)
        d_b = dgh.sum(axis=(0, 1))
        return tuple(rounded(a, dtype) for a in (dxw, dz + dw, d_w, d_b))


def _backward_step(xp, dz, dw, g, has_g, act, ghn, h_prev, dh, dx, dg):
    """One step back in NumPy, the rule of gru_compiled's _backward_row for every sample at once."""
    hidden = dz.shape[1]
    xp.add(dz, dw, out=dh)
    if has_g:
        dh += g
    r, z, n = act[:, :hidden], act[:, hidden:2 * hidden], act[:, 2 * hidden:]
    dx[:, 2 * hidden:] = dh * (1.0 - z) * (1.0 - n * n)
    dx[:, hidden:2 * hidden] = dh * (h_prev - n) * z * (1.0 - z)
    dx[:, :hidden] = dx[:, 2 * hidden:] * ghn * r * (1.0 - r)
    dg[:, :2 * hidden] = dx[:, :2 * hidden]
    xp.multiply(dx[:, 2 * hidden:], r, out=dg[:, 2 * hidden:])
    xp.multiply(dh, z, out=dz)


def _outputs(xp, hs, gates, ghn, h0, dtype):
    """GRULayerOp's four outputs from its filled buffers (hs and h0 in the compute dtype)."""
    hs = rounded(hs, dtype)
    return hs, gates, ghn, rounded(xp.array(hs[-1] if len(hs) else h0), dtype)


_gru_layer_op = register(GRULayerOp())
_gru_layer_backward_op = register(GRULayerBackwardOp())


def _gru_layer_vjp_in_ops(xw, h0, w_hh, b_hh, ghs, g_last=None):
    """gru_layer's gradient in Ember ops (recorded, so it can be differentiated again): the steps are
    replayed through gru_cell, then walked back with gru_cell's own gradient in ops."""
    from ember.ops.linalg import matmul
    from ember.ops.recurrent import _gru_cell_vjp_in_ops, gru_cell
    from ember.ops.shape import cat, stack
    from ember.ops.split import split, unbind

    steps, _, three_h = xw.shape
    hidden = three_h // 3
    w_t = w_hh.transpose(0, 1)
    inputs, hidden_proj, h_prev = [], [], []
    h = h0
    for xt in unbind(xw, 0):
        gh = h @ w_t if b_hh is None else h @ w_t + b_hh
        x_rz, x_n = split(xt, (2 * hidden, hidden), -1)
        inputs.append((x_rz, x_n))
        hidden_proj.append(gh)
        h_prev.append(h)
        h = gru_cell(x_rz, x_n, gh, h)
    ghs = unbind(ghs, 0) if ghs is not None else [None] * steps
    dxs, dghs = [None] * steps, [None] * steps
    dh = g_last  # the last state's own gradient enters with the last step's
    for t in range(steps - 1, -1, -1):
        g = ghs[t] if dh is None else (dh if ghs[t] is None else ghs[t] + dh)
        d_rz, d_n, dghs[t], dh_direct = _gru_cell_vjp_in_ops(*inputs[t], hidden_proj[t], h_prev[t], g)
        dxs[t] = cat([d_rz, d_n], -1)
        dh = dh_direct + dghs[t] @ w_hh
    dgh = stack(dghs, 0)
    dw = matmul(dgh.reshape(-1, three_h).transpose(0, 1), stack(h_prev, 0).reshape(-1, hidden))
    return stack(dxs, 0), dh, dw, None if b_hh is None else dgh.sum((0, 1))


def gru_layer(xw, h0, w_hh, b_hh=None):
    """Every step's state (T, N, H) of a GRU layer from every step's input projection xw (T, N, 3H, gates
    [r, z, n], the input bias included), the initial state (N, H), the hidden-to-hidden weight (3H, H) and
    its bias (3H,) or None."""
    return apply(_gru_layer_op, xw, h0, w_hh, b_hh)[0]


def gru_layer_states(xw, h0, w_hh, b_hh=None):
    """(hs, h_T): gru_layer's states with the last one as a tensor of its own (whose gradient costs no dense
    (T, N, H) one, as hs[-1]'s does)."""
    outs = apply(_gru_layer_op, xw, h0, w_hh, b_hh)
    return outs[0], outs[3]
