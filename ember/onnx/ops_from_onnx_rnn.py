"""ONNX's recurrent operators (LSTM, GRU) for ember.onnx.load, unrolled over the sequence with Ember ops
(the sequence length must be known; the batch may vary)."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.nn import functional as F
from ember.onnx.ops_from_onnx import T, onnx_op


def _rnn_common(ins, a, op: str, gates: int):
    x = T(ins[0])
    if a.get("layout", 0):
        x = x.transpose(0, 1)  # (batch, seq, in) -> (seq, batch, in)
    for key in ("clip", "activations"):
        if key in a:
            raise NotImplementedError(f"ember.onnx.load: {op} with the '{key}' attribute is not supported")
    seq_lens = ins[4] if len(ins) > 4 else None
    if seq_lens is not None and not np.all(np.asarray(seq_lens) == x.shape[0]):
        raise NotImplementedError(f"ember.onnx.load: {op} with sequence_lens shorter than the sequence is not supported")
    hidden = a["hidden_size"]
    direction = a.get("direction", "forward")
    n_dir = 2 if direction == "bidirectional" else 1
    w, r = T(ins[1]), T(ins[2])
    b = T(ins[3]) if len(ins) > 3 and ins[3] is not None else None
    steps, batch = int(x.shape[0]), int(x.shape[1])
    h0 = T(ins[5]) if len(ins) > 5 and ins[5] is not None else None
    dirs = []
    for d in range(n_dir):
        reverse = direction == "reverse" or d == 1
        wb = b[d, :gates * hidden] if b is not None else None
        rb = b[d, gates * hidden:] if b is not None else None
        h = h0[d] if h0 is not None else creation.zeros(batch, hidden, dtype=x.dtype)
        dirs.append((w[d], r[d], wb, rb, h, reverse))
    return x, steps, hidden, n_dir, dirs


def _rnn_outputs(a, ys, hs, cs=None):
    y = ops.stack(ys, dim=1)  # (seq, num_directions, batch, hidden)
    y_h = ops.stack(hs, dim=0)
    y_c = ops.stack(cs, dim=0) if cs is not None else None
    if a.get("layout", 0):
        y, y_h = y.permute(2, 0, 1, 3), y_h.transpose(0, 1)
        y_c = y_c.transpose(0, 1) if y_c is not None else None
    return [y, y_h] + ([y_c] if y_c is not None else [])


@onnx_op("LSTM")
def _lstm(ins, a):
    if len(ins) > 7 and ins[7] is not None:
        raise NotImplementedError("ember.onnx.load: LSTM with peepholes is not supported")
    if a.get("input_forget", 0):
        raise NotImplementedError("ember.onnx.load: LSTM with input_forget is not supported")
    x, steps, hidden, n_dir, dirs = _rnn_common(ins, a, "LSTM", 4)
    c0 = T(ins[6]) if len(ins) > 6 and ins[6] is not None else None
    ys, hs, cs = [], [], []
    for d, (w, r, wb, rb, h, reverse) in enumerate(dirs):
        c = c0[d] if c0 is not None else ops.zeros_like(h)
        xw = F.linear(x, w, wb)  # every step's input projection at once
        out = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            g = xw[t] + F.linear(h, r, rb)
            i, o, f, cand = g.chunk(4, dim=-1)  # ONNX's gate order: input, output, forget, cell
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(cand)
            h = ops.sigmoid(o) * ops.tanh(c)
            out[t] = h
        ys.append(ops.stack(out, dim=0))
        hs.append(h)
        cs.append(c)
    return _rnn_outputs(a, ys, hs, cs)


@onnx_op("GRU")
def _gru(ins, a):
    x, steps, hidden, n_dir, dirs = _rnn_common(ins, a, "GRU", 3)
    before = a.get("linear_before_reset", 0)
    ys, hs = [], []
    for w, r, wb, rb, h, reverse in dirs:
        xw = F.linear(x, w, wb)
        rz, rr, rh = r.chunk(3, dim=0)  # ONNX's gate order: update, reset, hidden
        bz, br, bh = rb.chunk(3) if rb is not None else (None, None, None)
        out = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            xz, xr, xh = xw[t].chunk(3, dim=-1)
            z = ops.sigmoid(xz + F.linear(h, rz, bz))
            rt = ops.sigmoid(xr + F.linear(h, rr, br))
            n = ops.tanh(xh + (rt * F.linear(h, rh, bh) if before else F.linear(rt * h, rh, bh)))
            h = (1 - z) * n + z * h
            out[t] = h
        ys.append(ops.stack(out, dim=0))
        hs.append(h)
    return _rnn_outputs(a, ys, hs)
