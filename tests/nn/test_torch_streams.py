"""After the same manual_seed, nn.init, every module's initial weights and every dropout mask are PyTorch's."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import ember as em


def _seed(seed=0):
    em.manual_seed(seed)
    torch.manual_seed(seed)


def _next_draws_agree():
    np.testing.assert_array_equal(em.rand(3).numpy(), torch.rand(3).numpy())


INITS = {
    "uniform_": lambda init, w, g: init.uniform_(w, -0.3, 0.5, generator=g),
    "normal_": lambda init, w, g: init.normal_(w, 0.1, 2.0, generator=g),
    "xavier_uniform_": lambda init, w, g: init.xavier_uniform_(w, gain=init.calculate_gain("tanh"), generator=g),
    "xavier_normal_": lambda init, w, g: init.xavier_normal_(w, gain=0.7, generator=g),
    "kaiming_uniform_": lambda init, w, g: init.kaiming_uniform_(w, a=math.sqrt(5), generator=g),
    "kaiming_uniform_fan_out": lambda init, w, g: init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu",
                                                                         generator=g),
    "kaiming_normal_": lambda init, w, g: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu", generator=g),
    "trunc_normal_": lambda init, w, g: init.trunc_normal_(w, generator=g),
    "trunc_normal_vit": lambda init, w, g: init.trunc_normal_(w, std=0.02, generator=g),
    "trunc_normal_tail": lambda init, w, g: init.trunc_normal_(w, mean=0.0, std=1.0, a=1.5, b=3.0, generator=g),
    "sparse_": lambda init, w, g: init.sparse_(w, 0.3, std=0.05, generator=g),
}


@pytest.mark.parametrize("name", sorted(INITS))
@pytest.mark.parametrize("shape", [(20, 30), (7, 3, 3, 3)])
@pytest.mark.parametrize("own_generator", [False, True], ids=["default", "generator"])
def test_init_functions_draw_torchs_values(name, shape, own_generator):
    if name == "sparse_" and len(shape) != 2:
        pytest.skip("sparse_ takes 2-D tensors")
    _seed(1)
    g, tg = (em.Generator().manual_seed(5), torch.Generator().manual_seed(5)) if own_generator else (None, None)
    a, b = em.empty(shape), torch.empty(shape)
    INITS[name](em.nn.init, a, g)
    INITS[name](torch.nn.init, b, tg)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    _next_draws_agree()


@pytest.mark.parametrize("shape", [(20, 30), (30, 20), (8, 2, 3, 3)])
def test_orthogonal_draws_torchs_normals_and_agrees_to_rounding(shape):
    # The normals are PyTorch's; the QR factorisation is LAPACK's in both, in a blocked order that can differ.
    _seed(2)
    a, b = em.empty(shape), torch.empty(shape)
    em.nn.init.orthogonal_(a, gain=1.5)
    torch.nn.init.orthogonal_(b, gain=1.5)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=2e-6)
    _next_draws_agree()


MODULES = {
    "Linear": lambda nn: nn.Linear(7, 5),
    "LinearNoBias": lambda nn: nn.Linear(33, 20, bias=False),
    "Bilinear": lambda nn: nn.Bilinear(3, 4, 5),
    "Conv1d": lambda nn: nn.Conv1d(3, 8, 3),
    "Conv2d": lambda nn: nn.Conv2d(3, 16, 3, padding=1),
    "Conv2dGroups": lambda nn: nn.Conv2d(4, 8, 3, groups=2),
    "ConvTranspose1d": lambda nn: nn.ConvTranspose1d(4, 6, 3, groups=2),
    "ConvTranspose2d": lambda nn: nn.ConvTranspose2d(4, 6, 3),
    "Embedding": lambda nn: nn.Embedding(50, 8, padding_idx=3),
    "EmbeddingSmall": lambda nn: nn.Embedding(3, 4),
    "RNN": lambda nn: nn.RNN(5, 7, num_layers=2),
    "LSTM": lambda nn: nn.LSTM(5, 7, num_layers=2, bidirectional=True),
    "LSTMProj": lambda nn: nn.LSTM(5, 7, proj_size=3),
    "GRU": lambda nn: nn.GRU(5, 7, bias=False),
    "RNNCell": lambda nn: nn.RNNCell(5, 7),
    "LSTMCell": lambda nn: nn.LSTMCell(5, 7),
    "GRUCell": lambda nn: nn.GRUCell(5, 7),
    "BatchNorm2d": lambda nn: nn.BatchNorm2d(4),
    "LayerNorm": lambda nn: nn.LayerNorm(6),
    "GroupNorm": lambda nn: nn.GroupNorm(2, 4),
    "PReLU": lambda nn: nn.PReLU(3),
    "MultiheadAttention": lambda nn: nn.MultiheadAttention(8, 2),
    "MultiheadAttentionKdim": lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=6, add_bias_kv=True),
    "TransformerEncoderLayer": lambda nn: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16),
    "TransformerDecoderLayer": lambda nn: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16),
    "TransformerEncoder": lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 2),
    "Transformer": lambda nn: nn.Transformer(8, 2, 1, 1, 16),
    "Sequential": lambda nn: nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 26 * 26, 10)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_start_from_torchs_weights(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. the nested-tensor note of TransformerEncoder
        _seed(0)
        theirs = MODULES[name](torch.nn)
        ours = MODULES[name](em.nn)
    expected = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    got = {k: v.detach().numpy() for k, v in ours.state_dict().items()}
    assert list(got) == list(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    _next_draws_agree()


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.77])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_masks_are_torchs(p, dtype):
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 6)).astype(dtype)
    F, TF = em.nn.functional, torch.nn.functional
    _seed(3)
    for fn in ("dropout", "dropout1d", "dropout2d"):
        arg = x[:, :, 0] if fn == "dropout1d" else x
        np.testing.assert_array_equal(getattr(F, fn)(em.tensor(arg), p).numpy(),
                                      getattr(TF, fn)(torch.tensor(arg), p).numpy(), err_msg=fn)
    for half in ("float16", "bfloat16"):  # the scale 1 / (1 - p) is divided in float32, then rounded
        e, t = getattr(em, half), getattr(torch, half)
        if e is not None:
            np.testing.assert_array_equal(F.dropout(em.tensor(x).to(e), p).float().numpy(),
                                          TF.dropout(torch.tensor(x).to(t), p).float().numpy(), err_msg=half)
    np.testing.assert_array_equal(em.nn.Dropout(p)(em.tensor(x)).numpy(), torch.nn.Dropout(p)(torch.tensor(x)).numpy())
    a, b = em.tensor(x), torch.tensor(x)
    F.dropout(a, p, inplace=True), TF.dropout(b, p, inplace=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    _next_draws_agree()


LAYERS_WITH_DROPOUT = {
    "LSTM": (lambda nn: nn.LSTM(8, 6, num_layers=3, dropout=0.4), lambda m, x: m(x)[0]),
    "GRU": (lambda nn: nn.GRU(8, 6, num_layers=2, dropout=0.4, bidirectional=True), lambda m, x: m(x)[0]),
    "MultiheadAttention": (lambda nn: nn.MultiheadAttention(8, 2, dropout=0.3), lambda m, x: m(x, x, x)[0]),
    "MultiheadAttentionNoWeights": (lambda nn: nn.MultiheadAttention(8, 2, dropout=0.3),
                                    lambda m, x: m(x, x, x, need_weights=False)[0]),
    "TransformerEncoderLayer": (lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3), lambda m, x: m(x)),
    "TransformerDecoderLayer": (lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.3), lambda m, x: m(x, x)),
}


@pytest.mark.parametrize("name", sorted(LAYERS_WITH_DROPOUT))
def test_layers_drop_what_torch_drops(name):
    make, call = LAYERS_WITH_DROPOUT[name]
    _seed(0)
    theirs, ours = make(torch.nn), make(em.nn)
    x = np.random.default_rng(0).standard_normal((5, 3, 8)).astype(np.float32)
    _seed(1)
    # the masks agree exactly; the arithmetic around them to float32 rounding (a wrong mask is off by O(1))
    np.testing.assert_allclose(call(ours, em.tensor(x)).detach().numpy(), call(theirs, torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    _next_draws_agree()


def test_scaled_dot_product_attention_dropout_is_torchs():
    q = np.random.default_rng(1).standard_normal((2, 2, 5, 4)).astype(np.float32)
    _seed(2)
    ours = em.nn.functional.scaled_dot_product_attention(em.tensor(q), em.tensor(q), em.tensor(q), dropout_p=0.5)
    theirs = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(q), torch.tensor(q),
                                                               dropout_p=0.5)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    _next_draws_agree()
