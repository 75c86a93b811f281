"""RNN, LSTM, GRU and their cells against PyTorch with PyTorch's own weights: outputs, final states and
the gradients of inputs, initial states and every parameter; plus state-dict layout and init."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.ops.split import split, unbind

from .seq_helpers import RNG, assert_same_state_dict, run_pair

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")


def randn(*shape):
    return RNG.standard_normal(shape)


# (id, builder(nn namespace), input shape, initial-state shapes: None, one shape, or a pair (h, c))
SEQ_CASES = [
    ("lstm", lambda n: n.LSTM(4, 6), (5, 3, 4), None),
    ("lstm-hx", lambda n: n.LSTM(4, 6), (5, 3, 4), ((1, 3, 6), (1, 3, 6))),
    ("lstm-2layer-bidir-batch_first", lambda n: n.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True),
     (3, 6, 4), ((4, 3, 5), (4, 3, 5))),
    ("lstm-3layer", lambda n: n.LSTM(3, 4, num_layers=3), (4, 2, 3), None),
    ("lstm-nobias-bidir", lambda n: n.LSTM(4, 5, bias=False, bidirectional=True), (5, 2, 4), None),
    ("lstm-proj", lambda n: n.LSTM(4, 6, proj_size=3, num_layers=2, bidirectional=True), (4, 2, 4),
     ((4, 2, 3), (4, 2, 6))),
    ("lstm-unbatched", lambda n: n.LSTM(4, 5, num_layers=2), (6, 4), ((2, 5), (2, 5))),
    ("lstm-unbatched-batch_first", lambda n: n.LSTM(4, 5, batch_first=True, bidirectional=True), (6, 4), None),
    ("lstm-len1", lambda n: n.LSTM(4, 5, bidirectional=True), (1, 2, 4), None),
    ("gru", lambda n: n.GRU(4, 6), (5, 3, 4), None),
    ("gru-hx-2layer", lambda n: n.GRU(4, 6, num_layers=2), (5, 3, 4), (2, 3, 6)),
    ("gru-bidir-batch_first", lambda n: n.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
     (3, 6, 4), (4, 3, 5)),
    ("gru-nobias", lambda n: n.GRU(4, 5, bias=False), (5, 2, 4), None),
    ("gru-unbatched", lambda n: n.GRU(4, 5, bidirectional=True), (6, 4), (2, 5)),
    ("rnn-tanh", lambda n: n.RNN(4, 6, num_layers=2), (5, 3, 4), (2, 3, 6)),
    ("rnn-relu-bidir", lambda n: n.RNN(4, 5, nonlinearity="relu", bidirectional=True, batch_first=True),
     (3, 5, 4), None),
]

CELL_CASES = [
    ("lstmcell", lambda n: n.LSTMCell(4, 6), (3, 4), None),
    ("lstmcell-hx", lambda n: n.LSTMCell(4, 6), (3, 4), ((3, 6), (3, 6))),
    ("lstmcell-unbatched", lambda n: n.LSTMCell(4, 6, bias=False), (4,), ((6,), (6,))),
    ("grucell", lambda n: n.GRUCell(4, 6), (3, 4), (3, 6)),
    ("grucell-unbatched", lambda n: n.GRUCell(4, 6), (4,), None),
    ("rnncell-relu", lambda n: n.RNNCell(4, 6, nonlinearity="relu"), (3, 4), (3, 6)),
    ("rnncell-tanh-nobias", lambda n: n.RNNCell(4, 6, bias=False), (3, 4), None),
]


def _states(shapes):
    if shapes is None:
        return None
    if isinstance(shapes[0], tuple):
        return tuple(randn(*s) for s in shapes)
    return randn(*shapes)


@pytest.mark.parametrize("case", SEQ_CASES + CELL_CASES, ids=[c[0] for c in SEQ_CASES + CELL_CASES])
def test_matches_torch_float64(case):
    _, builder, shape, hx = case
    run_pair(builder, (randn(*shape), _states(hx)))


@pytest.mark.parametrize("case", [SEQ_CASES[2], SEQ_CASES[5], SEQ_CASES[11], SEQ_CASES[15], CELL_CASES[1],
                                  CELL_CASES[3]], ids=lambda c: c[0])
def test_matches_torch_float32(case):
    _, builder, shape, hx = case
    run_pair(builder, (randn(*shape), _states(hx)), dtype=np.float32)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_dropout_between_layers(name):
    build = lambda n: getattr(n, name)(4, 5, num_layers=3, dropout=0.5)  # noqa: E731
    # eval mode: no dropout, identical to PyTorch
    run_pair(build, (randn(5, 2, 4),), train=False)
    # training: a fresh mask per call, applied between layers only
    em.manual_seed(0)
    m = build(nn)
    x = em.tensor(randn(5, 2, 4).astype(np.float32))
    a, b = m(x)[0].detach(), m(x)[0].detach()
    assert a.shape == (5, 2, 5)
    assert not np.allclose(a.numpy(), b.numpy())
    m.eval()
    assert np.array_equal(m(x)[0].detach().numpy(), m(x)[0].detach().numpy())


def test_dropout_single_layer_warns():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


@pytest.mark.parametrize("builder", [
    lambda n: n.LSTM(4, 6, num_layers=2, bidirectional=True),
    lambda n: n.LSTM(4, 6, proj_size=2, num_layers=2, bidirectional=True, bias=False),
    lambda n: n.GRU(3, 5, num_layers=2, bidirectional=True),
    lambda n: n.RNN(3, 5, bias=False),
    lambda n: n.LSTMCell(3, 4),
    lambda n: n.GRUCell(3, 4, bias=False),
    lambda n: n.RNNCell(3, 4),
], ids=["lstm", "lstm-proj", "gru", "rnn", "lstmcell", "grucell", "rnncell"])
def test_state_dict_layout_matches_torch(builder):
    assert_same_state_dict(builder)
    assert repr(builder(nn)) == repr(builder(torch.nn))


def test_flat_weights_and_all_weights():
    m = nn.LSTM(3, 4, bidirectional=True)
    assert m._flat_weights_names == torch.nn.LSTM(3, 4, bidirectional=True)._flat_weights_names
    assert [[tuple(p.shape) for p in ps] for ps in m.all_weights] == [[(16, 3), (16, 4), (16,), (16,)]] * 2
    m.flatten_parameters()


@pytest.mark.parametrize("builder", [lambda n: n.LSTM(5, 16, num_layers=2), lambda n: n.GRUCell(5, 16)])
def test_default_init_is_uniform_in_one_over_sqrt_hidden(builder):
    m = builder(nn)
    bound = 1 / math.sqrt(16)
    values = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert values.std() > bound / 3  # spread over the range, not constant


def test_shape_errors():
    m = nn.LSTM(4, 5, num_layers=2)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        m(em.zeros(2, 3, 4, 4))
    with pytest.raises(RuntimeError, match="input_size"):
        m(em.zeros(2, 3, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 3, 5\)"):
        m(em.zeros(2, 3, 4), (em.zeros(1, 3, 5), em.zeros(2, 3, 5)))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        nn.GRU(4, 5)(em.zeros(2, 3, 4), em.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(4, 5, proj_size=5)
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        nn.GRUCell(4, 5)(em.zeros(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"LSTM: Expected sequence length to be larger than 0 in RNN, got input "
                                           r"of shape \(3, 0, 4\)"):
        nn.LSTM(4, 5, batch_first=True)(em.zeros(3, 0, 4))
    with pytest.raises(TypeError, match="GRU: input must be a floating-point tensor, got int64"):
        nn.GRU(4, 5)(em.zeros(2, 3, 4, dtype=em.int64))


def test_lstm_classifier_trains():
    """A few SGD steps on a learnable toy task lower the loss (the backward pass wires up end to end)."""
    em.manual_seed(0)
    lstm, head = nn.LSTM(3, 8, batch_first=True), nn.Linear(8, 2)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = em.optim.Adam(params, lr=0.05)
    x = em.tensor(RNG.standard_normal((16, 5, 3)).astype(np.float32))
    y = em.tensor((x.numpy()[:, :, 0].sum(1) > 0).astype(np.int64))
    losses = []
    for _ in range(15):
        opt.zero_grad()
        _, (h, _) = lstm(x)
        loss = nn.functional.cross_entropy(head(h[-1]), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    assert losses[-1] < 0.6 * losses[0]


# --- split: the multi-output op the recurrences slice with ---------------------------------
def test_split_forward_and_backward():
    x = randn(3, 7, 2)
    ex, tx = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    parts, tparts = split(ex, (2, 4, 1), 1), torch.split(tx, (2, 4, 1), 1)
    for a, b in zip(parts, tparts):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # only some pieces used: the others contribute zeros
    ((parts[0] * 2.0).sum() + (parts[2] ** 2).sum()).backward()
    ((tparts[0] * 2.0).sum() + (tparts[2] ** 2).sum()).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy())
    assert [tuple(p.shape) for p in split(ex, 3, 1)] == [(3, 3, 2), (3, 3, 2), (3, 1, 2)]


def test_unbind_second_order():
    x = randn(4, 3)
    ex, tx = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ys, tys = unbind(ex, 1), torch.unbind(tx, 1)
    assert len(ys) == 3 and ys[0].shape == (4,)
    g = em.autograd.grad((ys[1] ** 3).sum(), ex, create_graph=True)[0]
    tg = torch.autograd.grad((tys[1] ** 3).sum(), tx, create_graph=True)[0]
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy())
    np.testing.assert_allclose(em.autograd.grad(g.sum(), ex)[0].numpy(),
                               torch.autograd.grad(tg.sum(), tx)[0].numpy())
    assert unbind(em.ones(1, 2), 0)[0].shape == (2,)


@pytest.mark.parametrize("reads", ["output", "final_state"])  # the final state: the layers' h_T output
@pytest.mark.parametrize("hidden", [5, 128])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_jitted_training_of_the_fused_layers_equals_eager(kind, hidden, reads):
    """lstm_layer/gru_layer and their backward ops under ember.jit (at 128 hidden units, their compiled loops):
    the same losses and weights as eager over steps that change the learning rate, the sequence length and
    the data in place, with the classifier reading the last output or the final hidden state."""
    def make():
        em.manual_seed(0)
        model = nn.ModuleDict({"rnn": getattr(nn, kind)(3, hidden, batch_first=True, bidirectional=True),
                               "fc": nn.Linear(2 * hidden, 2)})
        return model, em.optim.Adam(model.parameters(), lr=0.05)

    def stepper(model, opt):
        def step(x, y):
            opt.zero_grad()
            out, state = model["rnn"](x)
            if reads == "output":
                features = out[:, -1]
            else:  # (2, N, H) for the two directions -> (N, 2H)
                h = state[0] if kind == "LSTM" else state
                features = h.transpose(0, 1).reshape(x.shape[0], -1)
            loss = nn.functional.cross_entropy(model["fc"](features), y)
            loss.backward()
            opt.step()
            return loss
        return step

    (m_eager, o_eager), (m_jit, o_jit) = make(), make()
    eager, jitted = stepper(m_eager, o_eager), em.jit(stepper(m_jit, o_jit))
    rng = np.random.default_rng(0)
    x = em.tensor(rng.standard_normal((8, 6, 3)).astype(np.float32))
    y = em.tensor(rng.integers(0, 2, 8))
    for i in range(8):
        if i == 3:
            for opt in (o_eager, o_jit):
                opt.param_groups[0]["lr"] = 0.01
        if i == 5:
            x = em.tensor(rng.standard_normal((8, 9, 3)).astype(np.float32))  # a longer sequence
        if i == 6:
            x.mul_(0.5)  # data changed in place
        np.testing.assert_allclose(jitted(x, y).item(), eager(x, y).item(), rtol=1e-5, atol=1e-6)
    for (name, pe), pj in zip(m_eager.named_parameters(), m_jit.parameters()):
        np.testing.assert_allclose(pj.detach().numpy(), pe.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_the_compiled_loops_read_the_recurrent_weight_of_each_call(kind):
    """The time loops pack the recurrent weight once per call (at 128 hidden units, on Ember's GEMM where the loops
    take it): after the weight changes in place, outputs and input gradients follow it as PyTorch's do."""
    em.manual_seed(0)
    layer = getattr(nn, kind)(4, 128, batch_first=True)
    ref = getattr(torch.nn, kind)(4, 128, batch_first=True)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            getattr(ref, name).copy_(torch.from_numpy(p.detach().numpy()))
    x = np.random.default_rng(1).standard_normal((32, 6, 4)).astype(np.float32)
    for scale in (1.0, -0.5):
        with em.no_grad():
            layer.weight_hh_l0.mul_(scale)
        with torch.no_grad():
            ref.weight_hh_l0.mul_(scale)
        xe, xt = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, tout = layer(xe)[0], ref(xt)[0]
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-5)
        out.sum().backward()
        tout.sum().backward()
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
