"""RNN, LSTM and GRU layers over a PackedSequence: each time step runs only the sequences that reach it.

The packed rows of time step t are the first batch_sizes[t] sequences (sorted longest first), so the
forward direction drops the states of sequences as they end, keeping each one's final state at its own
length, and the reverse direction starts each sequence from its initial state at its last step, adding
sequences as it walks back in time. As PyTorch does, initial states given in batch order are put in
sorted order first, and the final states are put back in batch order.
"""

from __future__ import annotations

from ember import ops
from ember.nn import functional as F
from ember.nn.modules.rnn_step import cell_step
from ember.nn.utils.rnn import PackedSequence


def run_packed(module, packed: PackedSequence, hx, cell: bool) -> tuple[PackedSequence, list]:
    """(the output PackedSequence, the final states in batch order) of an RNNBase `module` on `packed`."""
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    name = module._name()
    if data.ndim != 2:
        raise ValueError(f"{name}: a PackedSequence's data must be 2-D (rows, features), got shape {tuple(data.shape)}")
    if not data.dtype.is_floating_point:
        raise TypeError(f"{name}: input must be a floating-point tensor, got {data.dtype.name} "
                        f"(embed token indices first, e.g. with nn.Embedding)")
    if data.shape[-1] != module.input_size:
        raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {module.input_size}, "
                           f"got {data.shape[-1]}")
    sizes = [int(b) for b in batch_sizes.numpy()]
    if hx is not None and sorted_indices is not None:  # batch order -> the packed (sorted) order
        hx = tuple(s.index_select(1, sorted_indices) for s in hx) if cell else hx.index_select(1, sorted_indices)
    states = module._initial_states(data, sizes[0], hx, cell)
    starts = [0]
    for b in sizes[:-1]:
        starts.append(starts[-1] + b)
    dirs = 2 if module.bidirectional else 1

    def run_layer(layer, x, init_states):
        ws = [module._weights(layer, d) for d in range(dirs)]
        xws = module._input_projections(x, ws)
        outs, finals = [], []
        for d in range(dirs):
            init = [s[d] for s in init_states] if dirs == 2 else init_states
            walk = _backward_in_time if d == 1 else _forward_in_time
            out, last = walk(module.mode, xws[d], init, ws[d], sizes, starts)
            outs.append(out)
            finals.append(last)
        if dirs == 1:
            return outs[0], finals[0]
        return ops.cat(outs, -1), [ops.stack([f[k] for f in finals], 0) for k in range(len(finals[0]))]

    out, finals = module._run(data, states, run_layer)
    if unsorted_indices is not None:
        finals = [f.index_select(1, unsorted_indices) for f in finals]
    return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), finals


def _step(mode: str, xt, states: list, w: tuple) -> list:
    _w_ih, w_hh, _b_ih, b_hh, w_hr = w
    return cell_step(mode, xt, states, w_hh, b_hh, w_hr, F.linear)


def _forward_in_time(mode: str, xw, init: list, w: tuple, sizes: list, starts: list):
    """Steps 0..T-1; a sequence's state leaves the batch after its last step. Returns (packed output, finals)."""
    states, ended, outs = init, [], []
    for t, b in enumerate(sizes):
        if b < states[0].shape[0]:  # the sequences past the first b ended at step t-1
            ended.append([s[b:] for s in states])
            states = [s[:b] for s in states]
        states = _step(mode, xw[starts[t]:starts[t] + b], states, w)
        outs.append(states[0])
    ended.append(states)
    finals = [ops.cat([e[k] for e in reversed(ended)], 0) for k in range(len(states))]
    return ops.cat(outs, 0), finals


def _backward_in_time(mode: str, xw, init: list, w: tuple, sizes: list, starts: list):
    """Steps T-1..0; a sequence joins the batch, from its initial state, at its last step."""
    states = [s[:sizes[-1]] for s in init]
    outs = [None] * len(sizes)
    for t in reversed(range(len(sizes))):
        b, have = sizes[t], states[0].shape[0]
        if b > have:
            states = [ops.cat([s, s0[have:b]], 0) for s, s0 in zip(states, init)]
        states = _step(mode, xw[starts[t]:starts[t] + b], states, w)
        outs[t] = states[0]
    return ops.cat(outs, 0), states
