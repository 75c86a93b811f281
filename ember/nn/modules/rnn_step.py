"""One time step of an RNN, LSTM or GRU layer, shared by the padded and the packed time loops."""

from __future__ import annotations

from ember import ops
from ember.nn import functional as F
from ember.ops.recurrent import gru_cell, lstm_cell
from ember.ops.split import split
from ember.tensor import Tensor


def rnn_step(pre: Tensor, relu: bool) -> Tensor:
    """An Elman step's activation: relu or tanh."""
    return ops.relu(pre) if relu else ops.tanh(pre)


def cell_step(mode: str, xt: Tensor, states: list, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None,
              hidden_proj=F.linear) -> list:
    """One time step of a layer: the new states ([h, c] or [h]) from this step's input projection `xt`.

    `xt` holds the biases _input_projections folds in (for a GRU, b_hh stays here: its n part is scaled by
    the reset gate). `hidden_proj(h, w)` is h @ w.T (F.linear), or a batched matmul with w already transposed.
    """
    if mode == "LSTM":
        h, c = states
        h, c = lstm_cell(hidden_proj(h, w_hh) + xt, c)  # one fused op forward and backward (ember/ops/recurrent.py)
        return [h if w_hr is None else hidden_proj(h, w_hr), c]
    (h,) = states
    if mode == "GRU":
        gh = hidden_proj(h, w_hh)
        if b_hh is not None:
            gh = gh + b_hh
        hidden = xt.shape[-1] // 3
        x_rz, x_n = split(xt, (2 * hidden, hidden), -1)
        return [gru_cell(x_rz, x_n, gh, h)]  # one fused op forward and backward
    return [rnn_step(hidden_proj(h, w_hh) + xt, mode == "RNN_RELU")]
