"""Recurrent layers with PyTorch's interface and parameter names: RNN, LSTM, GRU and their cells.

A layer projects the inputs of all time steps with one matmul. LSTM (without projections) and GRU layers
then run each direction as one fused op over the whole sequence (lstm_layer, gru_layer), forward and
backward. RNN layers and projected LSTMs loop over time with one matmul with the hidden weights and a
fused step per time step, which autograd differentiates; there the two directions of a bidirectional
layer run in the same loop, as a batch of two. A PackedSequence input (nn.utils.rnn) runs each time step on
the sequences that reach it (rnn_packed.py); the step itself is rnn_step.cell_step in both loops.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ember import creation, ops
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.modules.rnn_packed import run_packed
from ember.nn.modules.rnn_step import cell_step, rnn_step
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence
from ember.ops.creation_ops import zeros_like_shape
from ember.ops.gru_layer import gru_layer_states
from ember.ops.recurrent import gru_cell
from ember.ops.recurrent_layer import lstm_layer_states
from ember.ops.split import split, unbind
from ember.tensor import Tensor

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _linear_rows(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """F.linear on x flattened to rows: one GEMM, where NumPy runs a 3-D x as a batch of small ones."""
    lead = tuple(x.shape[:-1])
    return F.linear(x.reshape(-1, x.shape[-1]), w, b).reshape(lead + (w.shape[0],))


# --- one time step, shared by the layers and the cells ----------------------------------------
def _fused_layer_ok(xws: list, ws: list, states: list) -> bool:
    """Whether lstm_layer/gru_layer can run this layer: every tensor of one floating dtype (autocast may mix them)."""
    dtypes = {t.dtype for t in (*xws, *(w[1] for w in ws), *(w[3] for w in ws if w[3] is not None), *states)}
    return len(dtypes) == 1 and next(iter(dtypes)).is_floating_point


def _layers_fused(mode: str, xws: list, ws: list, states: list):
    """One time-major LSTM or GRU layer, each direction one lstm_layer or gru_layer op (the reverse one over the
    flipped sequence): (output, final states) as RNNBase._run_layer returns them."""
    outs, hs_last, cs_last = [], [], []
    two = len(xws) == 2
    for d, (xw, w) in enumerate(zip(xws, ws)):
        if d == 1:
            xw = ops.flip(xw, (0,))
        if mode == "LSTM":
            h0, c0 = (states[0][d], states[1][d]) if two else states
            hs, h, c = lstm_layer_states(xw, h0, c0, w[1])
            cs_last.append(c)
        else:  # the GRU's hidden bias stays in the layer: its n part is scaled by the reset gate
            hs, h = gru_layer_states(xw, states[0][d] if two else states[0], w[1], w[3])
        hs_last.append(h)
        outs.append(ops.flip(hs, (0,)) if d == 1 else hs)
    out = ops.cat(outs, -1) if two else outs[0]
    finals = [hs_last, cs_last] if mode == "LSTM" else [hs_last]
    return out, [ops.stack(f, 0) if two else f[0] for f in finals]


# --- sequence layers --------------------------------------------------------------------------
class RNNBase(Module):
    """Shared construction, checks and the time loop of RNN, LSTM and GRU."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=3)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    name = f"{base}_l{layer}{suffix}"
                    setattr(self, name, Parameter(creation.empty(shape, device=device, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Kept for PyTorch compatibility; the weights need no flat buffer here."""

    @property
    def all_weights(self) -> list:
        """The parameters of each (layer, direction), in PyTorch's order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # --- checks --------------------------------------------------------------------------
    def _name(self) -> str:
        return "RNN" if self.mode.startswith("RNN") else self.mode

    def _prepare(self, input: Tensor, hx, cell: bool):
        """Batch an unbatched input and default/check the initial states; returns (input, states, batched)."""
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._name()}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        if not input.dtype.is_floating_point:
            raise TypeError(f"{self._name()}: input must be a floating-point tensor, got {input.dtype.name} "
                            f"(embed token indices first, e.g. with nn.Embedding)")
        batched = input.ndim == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        batch = input.shape[batch_dim]
        if input.shape[1 - batch_dim] == 0:  # a symbolic length (a traced dynamic shape) is not an int and passes
            raise RuntimeError(f"{self._name()}: Expected sequence length to be larger than 0 in RNN, got input of "
                               f"shape {tuple(input.shape)}")
        return input, self._initial_states(input, batch, hx, cell, batched), batched

    def _initial_states(self, like: Tensor, batch, hx, cell: bool, batched: bool = True) -> list:
        """The (layers*dirs, batch, H) initial states: zeros when hx is None, else hx (and cx) checked and batched."""
        layers = self.num_layers * (2 if self.bidirectional else 1)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        shapes = [(layers, batch, real_hidden)] + ([(layers, batch, self.hidden_size)] if cell else [])
        if hx is None:
            # zeros through an op on the input, so a traced batch size stays symbolic (ONNX, dynamic jit)
            return [zeros_like_shape(like, s) for s in shapes]
        states = list(hx) if cell else [hx]
        if cell and len(states) != 2:
            raise ValueError("LSTM: hx must be a tuple (h_0, c_0)")
        if not batched:
            if any(s.ndim != 2 for s in states):
                dims = ", ".join(f"{s.ndim}-D" for s in states)
                raise RuntimeError(f"For unbatched 2-D input, hx{' and cx' if cell else ''} should also be "
                                   f"2-D but got ({dims}) tensor{'s' if cell else ''}")
            states = [s.unsqueeze(1) for s in states]
        elif any(s.ndim != 3 for s in states):
            dims = ", ".join(f"{s.ndim}-D" for s in states)
            raise RuntimeError(f"For batched 3-D input, hx{' and cx' if cell else ''} should also be 3-D but "
                               f"got ({dims}) tensor{'s' if cell else ''}")
        for k, (s, shape) in enumerate(zip(states, shapes)):
            if tuple(s.shape) != shape:
                what = "hidden[0]" if k == 0 and cell else ("hidden[1]" if cell else "hidden")
                raise RuntimeError(f"Expected {what} size {shape}, got {tuple(s.shape)}")
        return states

    # --- the time loop -------------------------------------------------------------------
    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = "_reverse" if direction == 1 else ""
        get = self._parameters.get
        return tuple(get(f"{base}_l{layer}{suffix}") for base in
                     ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))

    def _run(self, input: Tensor, states: list, run_layer=None) -> tuple[Tensor, list]:
        """The whole stack on a 3-D input; states are (layers*dirs, N, H) tensors. Returns (output, finals).

        `run_layer(layer, x, init_states)` runs one layer (default: over a padded input, `_run_layer`).
        """
        dirs = 2 if self.bidirectional else 1
        tdim = 1 if self.batch_first else 0
        if run_layer is None:
            def run_layer(layer, x, init_states):
                return self._run_layer(layer, x, init_states, dirs, tdim)
        # per layer: (N, H) states for one direction, (2, N, H) for two
        per_layer = [unbind(s, 0) if dirs == 1 else
                     unbind(s.reshape((self.num_layers, 2) + tuple(s.shape[1:])), 0) for s in states]
        finals = [[] for _ in states]
        x = input
        for layer in range(self.num_layers):
            init_states = [p[layer] for p in per_layer]
            x, last = run_layer(layer, x, init_states)
            for f, s in zip(finals, last):
                f.append(s)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                # PyTorch drops between layers on its time-major outputs: the mask is drawn in that order
                x = F.dropout(x.transpose(0, 1).contiguous(), self.dropout, True).transpose(0, 1) \
                    if tdim == 1 else F.dropout(x, self.dropout, True)
        joined = [ops.stack(f, 0) if dirs == 1 else ops.cat(f, 0) for f in finals]
        return x, joined

    def _input_projections(self, x: Tensor, ws: list) -> list:
        """Every time step's input projection at once, per direction; LSTM and RNN fold both biases in here."""
        xws = []
        for w_ih, _w_hh, b_ih, b_hh, _w_hr in ws:
            b = None if b_ih is None else (b_ih if self.mode == "GRU" else b_ih + b_hh)
            xws.append(_linear_rows(x, w_ih, b))
        return xws

    def _run_layer(self, layer: int, x: Tensor, init_states: list, dirs: int, tdim: int):
        """One layer (both directions) over the whole sequence; returns (output, final states)."""
        mode = self.mode
        ws = [self._weights(layer, d) for d in range(dirs)]
        if mode in ("LSTM", "GRU") and ws[0][4] is None:
            # the fused layers run time-major: a batch-first input is transposed before its projection (a copy
            # of the narrow input), not the projections after it (the gradient of those, 3-4H wide, was
            # copied back)
            xws = self._input_projections(x.transpose(0, 1) if tdim == 1 else x, ws)
            if _fused_layer_ok(xws, ws, init_states):
                out, states = _layers_fused(mode, xws, ws, init_states)
                return (out.transpose(0, 1) if tdim == 1 else out), states
        xws = self._input_projections(x, ws)
        if dirs == 1:
            xw = xws[0]
            w_hh, w_hr, b_hh = ws[0][1], ws[0][4], ws[0][3]
            hidden_proj = F.linear  # h @ w.T
        else:
            # (2, ...): the reverse direction's inputs are flipped in time, so both run forwards
            xw = ops.stack([xws[0], ops.flip(xws[1], (tdim,))], 0)
            tdim += 1
            w_hh = ops.stack([ws[0][1], ws[1][1]], 0).transpose(1, 2)
            w_hr = None if ws[0][4] is None else ops.stack([ws[0][4], ws[1][4]], 0).transpose(1, 2)
            b_hh = None if ws[0][3] is None else ops.stack([ws[0][3], ws[1][3]], 0).unsqueeze(1)
            hidden_proj = ops.matmul  # (2, N, H) @ (2, H, G), w already transposed
        outs, states = [], init_states
        for xt in unbind(xw, tdim):
            states = cell_step(mode, xt, states, w_hh, b_hh, w_hr, hidden_proj)
            outs.append(states[0])
        out = ops.stack(outs, tdim)
        if dirs == 2:
            fwd, bwd = unbind(out, 0)
            out = ops.cat([fwd, ops.flip(bwd, (tdim - 1,))], -1)
        return out, states

    def _forward(self, input, hx, cell: bool):
        if isinstance(input, PackedSequence):
            return run_packed(self, input, hx, cell)
        input, states, batched = self._prepare(input, hx, cell)
        out, finals = self._run(input, states)
        if not batched:
            out = out.squeeze(0 if self.batch_first else 1)
            finals = [f.squeeze(1) for f in finals]
        return out, finals


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu), stacked and optionally bidirectional."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h_n,) = self._forward(input, hx, cell=False)
        return out, h_n


class LSTM(RNNBase):
    """Long short-term memory layers (gates i, f, g, o), stacked, optionally bidirectional and projected."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        out, (h_n, c_n) = self._forward(input, hx, cell=True)
        return out, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit layers (gates r, z, n), stacked and optionally bidirectional."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h_n,) = self._forward(input, hx, cell=False)
        return out, h_n


# --- cells ------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Shared parameters (weight_ih, weight_hh, bias_ih, bias_hh) and checks of the single-step cells."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(creation.empty(num_chunks * hidden_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(creation.empty(num_chunks * hidden_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(creation.empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _batch(self, input: Tensor, states: list):
        """Batch an unbatched input and default missing states to zeros; returns (input, states, batched)."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        for s in states:
            if s is not None and s.ndim != input.ndim:
                raise ValueError(f"{name}: Expected hidden to be {input.ndim}D, got {s.ndim}D instead")
        if not batched:
            input = input.unsqueeze(0)
            states = [None if s is None else s.unsqueeze(0) for s in states]
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        if any(s is None for s in states):
            zeros = zeros_like_shape(input, (input.shape[0], self.hidden_size))
            states = [zeros if s is None else s for s in states]
        return input, states, batched

    def _projections(self, input: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(input, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)


class RNNCell(RNNCellBase):
    """One Elman RNN step: h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, (h,), batched = self._batch(input, [hx])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        gi, gh = self._projections(input, h)
        h = rnn_step(gi + gh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from input and (h, c)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        states = [None, None] if hx is None else list(hx)
        input, (h, c), batched = self._batch(input, states)
        gi, gh = self._projections(input, h)
        i, f, g, o = split(gi + gh, self.hidden_size, -1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.sigmoid(o) * ops.tanh(c)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: h' from input and h."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, (h,), batched = self._batch(input, [hx])
        gi, gh = self._projections(input, h)
        x_rz, x_n = split(gi, (2 * self.hidden_size, self.hidden_size), -1)
        h = gru_cell(x_rz, x_n, gh, h)
        return h if batched else h.squeeze(0)
