"""nn.utils.rnn (pad, pack, unpack) and RNN/LSTM/GRU on packed sequences, against PyTorch with PyTorch's weights:
packed data, padded outputs, final states and the gradients of inputs, initial states and every parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import ember as em
from ember.nn.utils import rnn as ernn

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

RNG = np.random.default_rng(7)
TOL = dict(atol=1e-10, rtol=1e-8)


def _pair(x: np.ndarray):
    """The same float64 array as a torch and an Ember leaf that require grad."""
    return torch.tensor(x, requires_grad=True), em.tensor(x, requires_grad=True)


def _close(e, t, what=""):
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}"
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), err_msg=what, **TOL)


# --- the functions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_and_its_gradient(batch_first, padding_side):
    arrays = [RNG.standard_normal((n, 2, 3)) for n in (3, 5, 1)]
    pairs = [_pair(a) for a in arrays]
    t = trnn.pad_sequence([p[0] for p in pairs], batch_first=batch_first, padding_value=-1.5,
                          padding_side=padding_side)
    e = ernn.pad_sequence([p[1] for p in pairs], batch_first=batch_first, padding_value=-1.5,
                          padding_side=padding_side)
    _close(e, t, "padded")
    g = RNG.standard_normal(tuple(t.shape))
    (t * torch.tensor(g)).sum().backward()
    (e * em.tensor(g)).sum().backward()
    for k, (tp, ep) in enumerate(pairs):
        _close(ep.grad, tp.grad, f"grad of sequence {k}")


def test_pad_sequence_takes_a_tensor_and_refuses_bad_lists():
    x = RNG.standard_normal((3, 4, 2))
    _close(ernn.pad_sequence(em.tensor(x)), trnn.pad_sequence(torch.tensor(x)))
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        ernn.pad_sequence([])
    with pytest.raises(RuntimeError, match=r"sequence 1 has shape \(2, 4\), but sequence 0 has \(2, 3\)"):
        ernn.pad_sequence([em.zeros(2, 3), em.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, but got middle"):
        ernn.pad_sequence([em.zeros(2)], padding_side="middle")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths, enforce_sorted", [([5, 3, 3, 1], True), ([2, 3, 2, 3], False),
                                                     ([1, 5, 1, 4], False), ([4, 4, 4, 4], True)])
def test_pack_and_pad_packed_match_torch(batch_first, lengths, enforce_sorted):
    x = RNG.standard_normal((4, 6, 3) if batch_first else (6, 4, 3))
    tx, ex = _pair(x)
    tp = trnn.pack_padded_sequence(tx, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    ep = ernn.pack_padded_sequence(ex, em.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert isinstance(ep, tuple) and ep._fields == tp._fields
    _close(ep.data, tp.data, "data")
    assert ep.batch_sizes.dtype == em.int64 and ep.batch_sizes.tolist() == tp.batch_sizes.tolist()
    for name in ("sorted_indices", "unsorted_indices"):  # ties keep batch order, as PyTorch sorts them
        t_idx, e_idx = getattr(tp, name), getattr(ep, name)
        assert (e_idx is None) == (t_idx is None) and (e_idx is None or e_idx.tolist() == t_idx.tolist()), name
    for total in (None, 7):
        t_pad, t_len = trnn.pad_packed_sequence(tp, batch_first=batch_first, padding_value=9.0, total_length=total)
        e_pad, e_len = ernn.pad_packed_sequence(ep, batch_first=batch_first, padding_value=9.0, total_length=total)
        _close(e_pad, t_pad, f"padded (total_length={total})")
        assert e_len.dtype == em.int64 and e_len.device.type == "cpu" and e_len.tolist() == t_len.tolist()
    g = RNG.standard_normal(tuple(t_pad.shape))
    (t_pad * torch.tensor(g)).sum().backward()
    (e_pad * em.tensor(g)).sum().backward()
    _close(ex.grad, tx.grad, "grad through pack and pad")


def test_pack_sequence_unpack_and_unpad_round_trip():
    arrays = [RNG.standard_normal((n, 2)) for n in (2, 4, 3)]
    tp = trnn.pack_sequence([torch.tensor(a) for a in arrays], enforce_sorted=False)
    ep = ernn.pack_sequence([em.tensor(a) for a in arrays], enforce_sorted=False)
    _close(ep.data, tp.data, "data")
    assert ep.sorted_indices.tolist() == tp.sorted_indices.tolist()
    for a, e in zip(arrays, ernn.unpack_sequence(ep)):
        np.testing.assert_array_equal(e.numpy(), a)
    padded = ernn.pad_sequence([em.tensor(a) for a in arrays], batch_first=True)
    for a, e in zip(arrays, ernn.unpad_sequence(padded, em.tensor([2, 4, 3]), batch_first=True)):
        np.testing.assert_array_equal(e.numpy(), a)
    with pytest.raises(RuntimeError, match="`lengths` array must be sorted in decreasing order when "
                                           "`enforce_sorted` is True. You can pass `enforce_sorted=False`"):
        ernn.pack_sequence([em.tensor(a) for a in arrays])


@pytest.mark.parametrize("lengths, words, kind", [
    ([2, 3], "`lengths` array must be sorted in decreasing order", RuntimeError),
    ([3, 0], "Length of all samples has to be greater than 0", RuntimeError),
    ([2], r"Expected `len\(lengths\)` to be equal to batch_size, but got 1 \(batch_size=2\)", RuntimeError),
    ([[2, 1]], "'lengths' should be a 1-D list of ints", RuntimeError),
    # PyTorch reads past the input here; Ember refuses
    ([5, 2], r"a length of 5 is more than the input's 4 time steps \(input shape \(4, 2, 3\)", ValueError),
])
def test_pack_padded_sequence_errors(lengths, words, kind):
    with pytest.raises(kind, match=words):
        ernn.pack_padded_sequence(em.zeros(4, 2, 3), lengths)


def test_bad_lengths_tensor_and_total_length():
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 tensor, but got a 2-D"):
        ernn.pack_padded_sequence(em.zeros(4, 2, 3), em.tensor([[3, 2]]))
    packed = ernn.pack_padded_sequence(em.zeros(4, 2, 3), [3, 2])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of the longest sequence "
                                         "in input, but got total_length=2 and max sequence length being 3"):
        ernn.pad_packed_sequence(packed, total_length=2)
    with pytest.raises(TypeError, match="batch_sizes should always be a 1-D int64 tensor on the CPU"):
        ernn.PackedSequence(em.zeros(5, 3), em.tensor([2.0, 2.0, 1.0]))


def test_packed_sequence_to_and_conversions():
    packed = ernn.pack_sequence([em.ones(3, 2), em.ones(2, 2)])
    assert packed.to(em.float32) is packed and packed.cpu() is packed
    double = packed.double()
    assert double.data.dtype == em.float64 and double.batch_sizes is packed.batch_sizes
    assert packed.to(dtype=em.float64).data.dtype == em.float64 and packed.long().data.dtype == em.int64
    assert not packed.is_cuda and not packed.is_pinned()
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    assert batch_sizes.tolist() == [2, 2, 1] and sorted_indices is None and unsorted_indices is None
    unsorted = ernn.pack_sequence([em.ones(2, 2), em.ones(3, 2)], enforce_sorted=False).to(em.float64)
    assert unsorted.sorted_indices.tolist() == [1, 0] and unsorted.unsorted_indices.tolist() == [1, 0]
    assert ernn.PackedSequence(data, batch_sizes).unsorted_indices is None
    rebuilt = ernn.PackedSequence(unsorted.data, unsorted.batch_sizes, unsorted.sorted_indices)
    assert rebuilt.unsorted_indices.tolist() == [1, 0]  # PyTorch's constructor inverts sorted_indices


# --- the recurrent layers --------------------------------------------------------------------------------

LAYERS = [
    ("lstm", lambda n, bf: n.LSTM(3, 4, batch_first=bf)),
    ("lstm-2layer-bidir", lambda n, bf: n.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=bf)),
    ("lstm-proj-bidir", lambda n, bf: n.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True, batch_first=bf)),
    ("gru", lambda n, bf: n.GRU(3, 4, batch_first=bf)),
    ("gru-2layer-bidir-nobias", lambda n, bf: n.GRU(3, 4, num_layers=2, bidirectional=True, bias=False,
                                                    batch_first=bf)),
    ("rnn-tanh-2layer", lambda n, bf: n.RNN(3, 4, num_layers=2, batch_first=bf)),
    ("rnn-relu-bidir", lambda n, bf: n.RNN(3, 4, nonlinearity="relu", bidirectional=True, batch_first=bf)),
]


def _modules(builder, batch_first):
    torch.manual_seed(0)
    t_mod = builder(torch.nn, batch_first).double()
    e_mod = builder(em.nn, batch_first).double()
    e_mod.load_state_dict({k: em.tensor(v.detach().numpy().copy()) for k, v in t_mod.state_dict().items()})
    return e_mod, t_mod


def _hidden_shapes(mod, batch):
    layers = mod.num_layers * (2 if mod.bidirectional else 1)
    h = (layers, batch, mod.proj_size or mod.hidden_size)
    return [h, (layers, batch, mod.hidden_size)] if isinstance(mod, torch.nn.LSTM) else [h]


@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
@pytest.mark.parametrize("batch_first, enforce_sorted, lengths, with_hx", [
    (False, True, [5, 3, 3, 1], False),
    (True, False, [2, 5, 1, 3], True),   # unsorted: the initial and final states are in batch order
    (False, False, [4, 4, 2, 4], True),  # ties
])
def test_layers_on_packed_sequences_match_torch(case, batch_first, enforce_sorted, lengths, with_hx):
    _, builder = case
    e_mod, t_mod = _modules(builder, batch_first)
    steps = max(lengths) + 1  # one step of padding past the longest
    x = RNG.standard_normal((len(lengths), steps, 3) if batch_first else (steps, len(lengths), 3))
    tx, ex = _pair(x)
    t_hx = e_hx = None
    if with_hx:
        pairs = [_pair(RNG.standard_normal(s)) for s in _hidden_shapes(t_mod, len(lengths))]
        t_hx = tuple(p[0] for p in pairs) if len(pairs) == 2 else pairs[0][0]
        e_hx = tuple(p[1] for p in pairs) if len(pairs) == 2 else pairs[0][1]
    tp = trnn.pack_padded_sequence(tx, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    ep = ernn.pack_padded_sequence(ex, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    t_out, t_h = t_mod(tp, t_hx)
    e_out, e_h = e_mod(ep, e_hx)
    assert isinstance(e_out, ernn.PackedSequence)
    assert e_out.batch_sizes is ep.batch_sizes and e_out.sorted_indices is ep.sorted_indices
    _close(e_out.data, t_out.data, "output data")
    t_pad, _ = trnn.pad_packed_sequence(t_out, batch_first=batch_first, total_length=steps)
    e_pad, _ = ernn.pad_packed_sequence(e_out, batch_first=batch_first, total_length=steps)
    t_states = t_h if isinstance(t_h, tuple) else (t_h,)
    e_states = e_h if isinstance(e_h, tuple) else (e_h,)
    for k, (e, t) in enumerate(zip(e_states, t_states)):
        _close(e, t, f"final state {k}")
    # Backward through a random projection of the padded output and of every final state.
    t_loss, e_loss = 0.0, 0.0
    for e, t in zip((e_pad, *e_states), (t_pad, *t_states)):
        g = RNG.standard_normal(tuple(t.shape))
        t_loss = t_loss + (t * torch.tensor(g)).sum()
        e_loss = e_loss + (e * em.tensor(g)).sum()
    t_loss.backward()
    e_loss.backward()
    _close(ex.grad, tx.grad, "grad of the input")
    if with_hx:
        for k, (e, t) in enumerate(zip(e_hx if isinstance(e_hx, tuple) else (e_hx,),
                                       t_hx if isinstance(t_hx, tuple) else (t_hx,))):
            _close(e.grad, t.grad, f"grad of initial state {k}")
    e_params = dict(e_mod.named_parameters())
    for name, p in t_mod.named_parameters():
        _close(e_params[name].grad, p.grad, f"grad of {name}")


def test_final_state_is_each_sequence_at_its_own_length():
    lstm = em.nn.LSTM(2, 3, batch_first=True)
    x = em.randn(3, 5, 2)
    lengths = [2, 5, 3]
    out, (h, c) = lstm(ernn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    padded, got_lengths = ernn.pad_packed_sequence(out, batch_first=True)
    assert got_lengths.tolist() == lengths and tuple(padded.shape) == (3, 5, 3)
    for i, n in enumerate(lengths):
        alone, (h_i, c_i) = lstm(x[i:i + 1, :n])  # the sequence by itself, unpadded
        np.testing.assert_allclose(h[0, i].detach().numpy(), h_i[0, 0].detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(c[0, i].detach().numpy(), c_i[0, 0].detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(padded[i, :n].detach().numpy(), alone[0].detach().numpy(), atol=1e-6)
        assert not padded[i, n:].detach().numpy().any()


def test_packed_input_errors_name_the_layer_and_shapes():
    packed = ernn.pack_padded_sequence(em.randn(4, 2, 3), [3, 2])
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \(1, 3, 4\)"):
        em.nn.GRU(3, 4)(packed, em.zeros(1, 3, 4))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got \(1, 3, 4\)"):
        em.nn.LSTM(3, 4)(packed, (em.zeros(1, 3, 4), em.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 5, got 3"):
        em.nn.LSTM(5, 4)(packed)
    tokens = ernn.pack_padded_sequence(em.zeros(4, 2, 3, dtype=em.int64), [3, 2])
    with pytest.raises(TypeError, match="LSTM: input must be a floating-point tensor, got int64"):
        em.nn.LSTM(3, 4)(tokens)


def test_packed_lstm_trains_a_classifier_on_sequences_of_many_lengths():
    """A small LSTM tells apart sequences by the sign of their sum, however long they are (padded to 9)."""
    em.manual_seed(0)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 10, size=64)
    x = np.zeros((64, 9, 1), np.float32)
    for i, n in enumerate(lengths):
        x[i, :n, 0] = rng.standard_normal(n)
    y = np.array([int(x[i, :n, 0].sum() > 0) for i, n in enumerate(lengths)])
    lstm, head = em.nn.LSTM(1, 8, batch_first=True), em.nn.Linear(8, 2)
    opt = em.optim.Adam([*lstm.parameters(), *head.parameters()], lr=0.05)
    xs, ys = em.tensor(x), em.tensor(y)
    for _ in range(60):
        opt.zero_grad()
        _, (h, _) = lstm(ernn.pack_padded_sequence(xs, lengths, batch_first=True, enforce_sorted=False))
        loss = em.nn.functional.cross_entropy(head(h[-1]), ys)
        loss.backward()
        opt.step()
    accuracy = float((head(h[-1]).argmax(1) == ys).float().mean())
    assert accuracy > 0.9, accuracy
