"""TransformerEncoderLayer and TransformerEncoder against PyTorch with PyTorch's own weights: output
and the gradients of the input and every parameter, for each option and mask kind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.nn.modules.transformer import generate_square_subsequent_mask

from .seq_helpers import RNG, assert_same_state_dict, run_pair

# PyTorch explains why it will not use nested tensors; Ember never does
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")

D, HEADS, FF, L, N = 8, 2, 16, 5, 3
CAUSAL = np.triu(np.ones((L, L), dtype=bool), 1)
KPM = np.zeros((N, L), dtype=bool)
KPM[1, 3:] = True


def randn(*shape):
    return RNG.standard_normal(shape)


def layer(**kw):
    kw.setdefault("dropout", 0.0)
    return lambda n: n.TransformerEncoderLayer(D, HEADS, FF, **kw)


def encoder(num_layers=2, final_norm=True, **kw):
    def build(n):
        norm = n.LayerNorm(D) if final_norm else None
        return n.TransformerEncoder(layer(**kw)(n), num_layers, norm=norm)
    return build


def src(batch_first=False):
    return randn(N, L, D) if batch_first else randn(L, N, D)


# (id, builder, args, forward kwargs)
CASES = [
    ("layer", layer(), (src(),), {}),
    ("layer-batch_first", layer(batch_first=True), (src(True),), {}),
    ("layer-norm_first", layer(norm_first=True), (src(),), {}),
    ("layer-gelu", layer(activation="gelu", batch_first=True), (src(True),), {}),
    ("layer-gelu-callable", lambda n: n.TransformerEncoderLayer(D, HEADS, FF, 0.0, n.functional.gelu), (src(),), {}),
    ("layer-gelu-module", lambda n: n.TransformerEncoderLayer(D, HEADS, FF, 0.0, n.GELU(), norm_first=True),
     (src(),), {}),
    ("layer-nobias-eps", layer(bias=False, layer_norm_eps=1e-3), (src(),), {}),
    ("layer-bool-mask", layer(), (src(),), {"src_mask": CAUSAL}),
    ("layer-float-mask", layer(), (src(),), {"src_mask": 0.5 * randn(L, L)}),
    ("layer-causal-hint", layer(batch_first=True), (src(True),), {"src_mask": CAUSAL, "is_causal": True}),
    ("layer-key_padding", layer(batch_first=True, norm_first=True), (src(True),), {"src_key_padding_mask": KPM}),
    ("layer-key_padding-and-mask", layer(), (src(),), {"src_key_padding_mask": KPM, "src_mask": CAUSAL}),
    ("layer-unbatched", layer(), (randn(L, D),), {"src_mask": CAUSAL}),
    ("encoder", encoder(), (src(),), {}),
    ("encoder-3-layers-no-norm", encoder(3, False, batch_first=True, norm_first=True), (src(True),), {}),
    ("encoder-causal-detected", encoder(batch_first=True), (src(True),),
     {"mask": np.where(CAUSAL, -np.inf, 0.0)}),
    ("encoder-causal-bool", encoder(), (src(),), {"mask": CAUSAL, "is_causal": True}),
    ("encoder-key_padding", encoder(activation="gelu"), (src(),), {"src_key_padding_mask": KPM}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_float64(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("layer-batch_first", "layer-norm_first", "layer-key_padding-and-mask",
                                   "encoder-causal-bool")], ids=lambda c: c[0])
def test_matches_torch_float32(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs, dtype=np.float32)


def test_eval_mode_with_default_dropout():
    # dropout=0.1 (the default): identity in eval mode, so PyTorch's outputs and gradients match exactly
    run_pair(lambda n: n.TransformerEncoderLayer(D, HEADS, FF), (src(),), {"src_mask": CAUSAL}, train=False)
    run_pair(lambda n: n.TransformerEncoder(n.TransformerEncoderLayer(D, HEADS, FF, batch_first=True), 2),
             (src(True),), {"src_key_padding_mask": KPM}, train=False)


def test_training_dropout_is_random():
    em.manual_seed(0)
    m = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.5)
    x = em.tensor(src().astype(np.float32))
    assert not np.allclose(m(x).detach().numpy(), m(x).detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(x).detach().numpy(), m(x).detach().numpy())


@pytest.mark.parametrize("builder", [layer(), layer(bias=False), encoder(), encoder(final_norm=False)],
                         ids=["layer", "layer-nobias", "encoder", "encoder-no-norm"])
def test_state_dict_layout_matches_torch(builder):
    assert_same_state_dict(builder)


def test_encoder_layers_are_independent_copies():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, HEADS, FF), 2)
    a, b = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert a is not b
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())  # same start, as in PyTorch
    with em.no_grad():
        a.add_(1.0)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())


def test_activation_flags_and_errors():
    assert nn.TransformerEncoderLayer(D, HEADS).activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(D, HEADS, activation="gelu").activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(D, HEADS, activation=em.tanh).activation_relu_or_gelu == 0
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(D, HEADS, activation="swish")


def test_square_subsequent_mask():
    np.testing.assert_array_equal(generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
