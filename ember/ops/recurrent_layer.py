"""A whole LSTM layer over a sequence as one op, forward and backward (what cuDNN and oneDNN run).

`lstm_cell` makes each time step one op, but a step still costs a hidden-projection GEMM, an add and the
cell forward, and backward a GEMM for the hidden state's gradient and another for the weight's, each
an autograd node. `lstm_layer` runs the recurrence in one kernel from the input projections of every
step (computed outside as one GEMM), and its gradient, `lstm_layer_backward`, walks the steps back
once: per step one GEMM for the hidden state's gradient and the cell's elementwise rule, then the
weight's gradient for all steps as one GEMM. The forward keeps what that walk reads (the activated
gates, the cell states and their tanh) as extra outputs, as cuDNN keeps its reserve space; rebuilding
them cost a GEMM as large as the weight's gradient. `lstm_layer` returns only (hs, c_T).
With `create_graph=True` the gradient is written in Ember ops (step by step, through `lstm_cell`), so
every order of derivative exists. Gates are in PyTorch's order [i, f, g, o], as `lstm_cell`'s.
"""

from __future__ import annotations

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.kernels import gemm
from ember.kernels.lstm import LSTM
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, spec
from ember.ops.opmath import opmath, rounded, upcast


def _check(xw, h0, c0, w_hh, what: str, dtypes: bool = True):
    if len(xw.shape) != 3 or len(h0.shape) != 2 or len(w_hh.shape) != 2:
        raise ShapeError(f"{what}: expected input projections (T, N, 4*H), states (N, H) and a weight (4*H, H), got "
                         f"{fmt_shape(xw.shape)}, {fmt_shape(h0.shape)} and {fmt_shape(w_hh.shape)}")
    t, n, g = xw.shape
    hidden = h0.shape[1]
    if tuple(h0.shape) != (n, hidden) or tuple(c0.shape) != (n, hidden) or g != 4 * hidden \
            or tuple(w_hh.shape) != (4 * hidden, hidden):
        raise ShapeError(f"{what}: shapes do not agree: input projections {fmt_shape(xw.shape)}, h0 "
                         f"{fmt_shape(h0.shape)}, c0 {fmt_shape(c0.shape)}, weight {fmt_shape(w_hh.shape)}")
    found = {np.dtype(a.dtype) for a in (xw, h0, c0, w_hh)}
    if dtypes and (len(found) != 1 or not found <= FLOAT_NP):
        raise TypeError(f"{what}: expected floating-point tensors of one dtype, got "
                        f"{', '.join(str(a.dtype) for a in (xw, h0, c0, w_hh))}")


class LSTMLayerOp(Op):
    """(hs, c_T, gates, cs, tanh_cs, h_T) from (xw, h0, c0, w_hh): every step's hidden state (T, N, H), the last
    cell state, for the gradient every step's activated gates (T, N, 4H), the cell states (T + 1, N, H, from c0)
    and their tanh (T, N, H), those three in the compute dtype (float32 for float16/bfloat16), and the last
    hidden state as an output of its own: a model that reads only the final state (a classifier) gives its
    gradient to the backward as the last step's incoming one, where hs[-1] made a dense (T, N, H) gradient."""

    name = "lstm_layer"
    n_outputs = 6
    fresh_output = True
    save_inputs = (0, 1, 2, 3)
    save_outputs = (0, 2, 3, 4)

    def infer(self, xw, h0, c0, w_hh):
        _check(xw, h0, c0, w_hh, self.name)
        steps, state = xw.shape[0], tuple(h0.shape)
        work = opmath(xw.dtype)
        return (spec((steps,) + state, xw.dtype), spec(tuple(c0.shape), xw.dtype), spec(tuple(xw.shape), work),
                spec((steps + 1,) + state, work), spec((steps,) + state, work), spec(state, xw.dtype))

    def kernel(self, xp, xw, h0, c0, w_hh):
        _check(xw, h0, c0, w_hh, self.name)  # eager calls run the kernel without infer
        dtype = xw.dtype  # float16/bfloat16: computed in float32, each output rounded once
        xw, h0, c0, w_hh = (upcast(a) for a in (xw, h0, c0, w_hh))
        steps, _, four_h = xw.shape
        hidden = four_h // 4
        hs = xp.empty((steps,) + h0.shape, xw.dtype)
        gates = xp.empty(xw.shape, xw.dtype)
        cs = xp.empty((steps + 1,) + c0.shape, xw.dtype)
        cs[0] = c0
        tanh_cs = xp.empty((steps,) + c0.shape, xw.dtype)
        h = h0
        w_t = xp.ascontiguousarray(w_hh.T)  # BLAS runs these small products ~25% faster on a contiguous operand
        loop = LSTM.forward_loop(xp, xw.dtype, xw.size)
        if loop is not None:  # the whole time loop compiled, its GEMMs NumPy's BLAS called from inside
            batch_major = not xw.flags.c_contiguous and xw.transpose(1, 0, 2).flags.c_contiguous
            xs = xw.transpose(1, 0, 2) if batch_major else np.ascontiguousarray(xw)
            args = (xs, batch_major, np.ascontiguousarray(h0), w_t, LSTM.packed(w_t), hs, gates, cs, tanh_cs,
                    np.empty(xw.shape[1:], xw.dtype))
            LSTM.run_loop(self.name, loop, args, xw.shape[1], 2.0 * xw.size * hidden)
            return _outputs(xp, hs, gates, cs, tanh_cs, h0, dtype)
        compiled = LSTM.noted_steps(self.name, LSTM.step_forward(xp, xw.dtype, xw.size))
        if compiled is not None:
            pre = xp.empty(xw.shape[1:], xw.dtype)
            for t in range(steps):
                xp.matmul(h, w_t, out=pre)
                pre += xw[t]  # xw may be strided (a batch-first input's projections): the kernel reads C order
                h = hs[t]
                compiled(pre, cs[t], gates[t], cs[t + 1], tanh_cs[t], h)
            return _outputs(xp, hs, gates, cs, tanh_cs, h0, dtype)
        tmp = xp.empty(c0.shape, xw.dtype)
        # one step in about a dozen NumPy calls into the kept buffers (a step is small: call overhead counts)
        for t in range(steps):
            a = gates[t]
            xp.matmul(h, w_t, out=a)
            a += xw[t]
            i, f, g, o = (a[:, k * hidden:(k + 1) * hidden] for k in range(4))
            for sig in (a[:, :2 * hidden], o):
                with np.errstate(over="ignore"):  # exp overflows to inf for very negative inputs: sigmoid is 0
                    xp.exp(xp.negative(sig, out=sig), out=sig)
                sig += 1.0
                xp.reciprocal(sig, out=sig)
            xp.tanh(g, out=g)
            xp.multiply(f, cs[t], out=cs[t + 1])
            xp.multiply(i, g, out=tmp)
            cs[t + 1] += tmp
            xp.tanh(cs[t + 1], out=tanh_cs[t])
            h = xp.multiply(o, tanh_cs[t], out=hs[t])
        return _outputs(xp, hs, gates, cs, tanh_cs, h0, dtype)

    def vjp(self, ctx, ghs, gc, _gates, _cs, _tanh_cs, gh):  # the kept gates and cell states: only for this
        xw, h0, c0, w_hh = (ctx.input(i) for i in range(4))
        if grad_state.enabled:  # create_graph: a gradient made of differentiable ops
            grads = _lstm_layer_vjp_in_ops(xw, h0, c0, w_hh, ghs, gc, gh)
        else:
            grads = apply(_lstm_layer_backward_op, h0, c0, w_hh, *(ctx.output_at(k) for k in (0, 2, 3, 4)), ghs, gc,
                          gh)
        return tuple(g if ctx.needs_grad(i) else None for i, g in enumerate(grads))


class LSTMLayerBackwardOp(Op):
    """Gradients (of xw, h0, c0, w_hh) of lstm_layer from its kept outputs and the gradients of (hs, c_T, h_T);
    any of those may be None (zero)."""

    name = "lstm_layer_backward"
    n_outputs = 4
    fresh_output = True
    differentiable = False  # under create_graph the ops of _lstm_layer_vjp_in_ops are recorded instead

    def infer(self, h0, c0, w_hh, hs, gates, cs, tanh_cs, ghs, gc, gh=None):
        _check(gates, h0, c0, w_hh, self.name, dtypes=False)  # the kept gates are in the compute dtype
        return (spec(tuple(gates.shape), h0.dtype),) + tuple(spec(tuple(a.shape), a.dtype) for a in (h0, c0, w_hh))

    def kernel(self, xp, h0, c0, w_hh, hs, gates, cs, tanh_cs, ghs, gc, gh=None):
        dtype = h0.dtype
        work = gates.dtype
        h0, c0, w_hh, hs = (upcast(a).astype(work, copy=False) for a in (h0, c0, w_hh, hs))
        ghs = None if ghs is None else upcast(ghs).astype(work, copy=False)
        steps, _, four_h = gates.shape
        hidden = four_h // 4
        h_prev = xp.concatenate([h0[None], hs[:-1]])
        i, f, g, o = (gates[..., k * hidden:(k + 1) * hidden] for k in range(4))
        dpre = xp.empty(gates.shape, work)
        dh = xp.zeros(h0.shape, work) if gh is None else xp.array(gh, dtype=work)  # the last step's, on entry
        dc = xp.zeros(c0.shape, work) if gc is None else xp.array(gc, dtype=work)
        loop = LSTM.backward_loop(xp, work, gates.size)
        if loop is not None:  # the whole time loop compiled, its GEMMs NumPy's BLAS called from inside
            w_hh = xp.ascontiguousarray(w_hh)
            args = (xp.zeros((1, 1, 1), work) if ghs is None else xp.ascontiguousarray(ghs), ghs is not None,
                    w_hh, LSTM.packed(w_hh), *(xp.ascontiguousarray(a) for a in (gates, cs, tanh_cs)), dpre, dh, dc)
            LSTM.run_loop(self.name, loop, args, gates.shape[1], 2.0 * gates.size * hidden)
            return self._finish(xp, dpre, dh, dc, h_prev, dtype)
        tmp = xp.empty_like(dc)
        tanh_c = tanh_cs
        compiled = LSTM.noted_steps(self.name, LSTM.step_backward(xp, work, gates.size))
        for t in range(steps - 1, -1, -1):
            if ghs is not None:
                dh += ghs[t]
            if compiled is not None:
                compiled(dh, dc, gates[t], tanh_c[t], cs[t], dpre[t])
                xp.matmul(dpre[t], w_hh, out=dh)
                continue
            # dc += dh * o * (1 - tanh(c)^2);  d o = dh * tanh(c)
            xp.multiply(tanh_c[t], tanh_c[t], out=tmp)
            xp.subtract(1.0, tmp, out=tmp)
            tmp *= o[t]
            tmp *= dh
            dc += tmp
            d = dpre[t]
            xp.multiply(dh, tanh_c[t], out=d[:, 3 * hidden:])
            d[:, 3 * hidden:] *= o[t] * (1.0 - o[t])
            xp.multiply(dc, g[t], out=d[:, :hidden])
            d[:, :hidden] *= i[t] * (1.0 - i[t])
            xp.multiply(dc, cs[t], out=d[:, hidden:2 * hidden])
            d[:, hidden:2 * hidden] *= f[t] * (1.0 - f[t])
            xp.multiply(dc, i[t], out=d[:, 2 * hidden:3 * hidden])
            d[:, 2 * hidden:3 * hidden] *= 1.0 - g[t] * g[t]
            dc *= f[t]
            xp.matmul(d, w_hh, out=dh)
        return self._finish(xp, dpre, dh, dc, h_prev, dtype)

    @staticmethod
    def _finish(xp, dpre, dh, dc, h_prev, dtype):
        """The four gradients, with every step's share of the weight's as one GEMM: sum_t dpre_t^T @ h_{t-1}."""
        four_h = dpre.shape[-1]
        dw = gemm.matmul(dpre.reshape(-1, four_h).T, h_prev.reshape(-1, four_h // 4), xp=xp)
        return tuple(rounded(a, dtype) for a in (dpre, dh, dc, dw))


def _outputs(xp, hs, gates, cs, tanh_cs, h0, dtype):
    """LSTMLayerOp's six outputs from its filled buffers (hs, cs and h0 in the compute dtype)."""
    hs = rounded(hs, dtype)
    h_last = rounded(xp.array(hs[-1] if len(hs) else h0), dtype)
    return hs, rounded(xp.array(cs[-1]), dtype), gates, cs, tanh_cs, h_last


_lstm_layer_op = register(LSTMLayerOp())
_lstm_layer_backward_op = register(LSTMLayerBackwardOp())


def _lstm_layer_vjp_in_ops(xw, h0, c0, w_hh, ghs, gc, g_last=None):
    """lstm_layer's gradient in Ember ops (recorded, so it can be differentiated again): the steps are
    replayed through lstm_cell, then walked back with lstm_cell's own gradient in ops."""
    from ember.ops.linalg import matmul
    from ember.ops.recurrent import _lstm_cell_vjp_in_ops, lstm_cell
    from ember.ops.shape import stack
    from ember.ops.split import unbind

    steps, _, four_h = xw.shape
    w_t = w_hh.transpose(0, 1)
    pres, c_prev, h_prev = [], [], []
    h, c = h0, c0
    for xt in unbind(xw, 0):
        pre = h @ w_t + xt
        pres.append(pre)
        c_prev.append(c)
        h_prev.append(h)
        h, c = lstm_cell(pre, c)
    ghs = unbind(ghs, 0) if ghs is not None else [None] * steps
    dpres = [None] * steps
    dh, dc = g_last, gc  # the last hidden state's own gradient enters with the last step's
    for t in range(steps - 1, -1, -1):
        gh = ghs[t] if dh is None else (dh if ghs[t] is None else ghs[t] + dh)
        dpres[t], dc = _lstm_cell_vjp_in_ops(pres[t], c_prev[t], gh, dc)
        dh = dpres[t] @ w_hh
    dxw = stack(dpres, 0)
    dw = matmul(dxw.reshape(-1, four_h).transpose(0, 1), stack(h_prev, 0).reshape(-1, w_hh.shape[1]))
    return dxw, dh, dc, dw


def lstm_layer(xw, h0, c0, w_hh):
    """(hs, c_T) of an LSTM layer from every step's input projection xw (T, N, 4H, gates [i, f, g, o],
    biases included), the initial states (N, H) and the hidden-to-hidden weight (4H, H)."""
    return apply(_lstm_layer_op, xw, h0, c0, w_hh)[:2]


def lstm_layer_states(xw, h0, c0, w_hh):
    """(hs, h_T, c_T): lstm_layer's outputs with the last hidden state as a tensor of its own (whose gradient
    costs no dense (T, N, H) one, as hs[-1]'s does)."""
    hs, c, *_, h = apply(_lstm_layer_op, xw, h0, c0, w_hh)
    return hs, h, c
