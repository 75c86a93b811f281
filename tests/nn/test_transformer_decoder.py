"""TransformerDecoderLayer, TransformerDecoder and Transformer against PyTorch with PyTorch's own weights:
outputs and the gradients of every input and parameter, for each option and mask kind; parameter names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

from .seq_helpers import RNG, assert_same_state_dict, run_pair

pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
              pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")]  # PyTorch warns; Ember does not

D, HEADS, FF, T, S, N = 8, 2, 16, 4, 5, 3  # tgt length T, memory (src) length S, batch N
CAUSAL = np.triu(np.ones((T, T), dtype=bool), 1)
TGT_KPM = np.zeros((N, T), dtype=bool)
TGT_KPM[2, 3:] = True
MEM_KPM = np.zeros((N, S), dtype=bool)
MEM_KPM[0, 4:] = True


def randn(*shape):
    return RNG.standard_normal(shape)


def seq(length, batch_first=False):
    return randn(N, length, D) if batch_first else randn(length, N, D)


def dec_layer(**kw):
    kw.setdefault("dropout", 0.0)
    return lambda n: n.TransformerDecoderLayer(D, HEADS, FF, **kw)


def decoder(num_layers=2, final_norm=True, **kw):
    def build(n):
        return n.TransformerDecoder(dec_layer(**kw)(n), num_layers, norm=n.LayerNorm(D) if final_norm else None)
    return build


def transformer(**kw):
    kw.setdefault("dropout", 0.0)
    return lambda n: n.Transformer(D, HEADS, 2, 2, FF, **kw)


CASES = [
    ("layer", dec_layer(), (seq(T), seq(S)), {}),
    ("layer-batch_first-norm_first", dec_layer(batch_first=True, norm_first=True), (seq(T, True), seq(S, True)), {}),
    ("layer-gelu-nobias", dec_layer(activation="gelu", bias=False), (seq(T), seq(S)), {}),
    ("layer-causal", dec_layer(), (seq(T), seq(S)), {"tgt_mask": CAUSAL, "tgt_is_causal": True}),
    ("layer-all-masks", dec_layer(batch_first=True), (seq(T, True), seq(S, True)),
     {"tgt_mask": np.where(CAUSAL, -np.inf, 0.0), "memory_mask": 0.3 * randn(T, S),
      "tgt_key_padding_mask": TGT_KPM, "memory_key_padding_mask": MEM_KPM}),
    ("layer-unbatched", dec_layer(), (randn(T, D), randn(S, D)), {"tgt_mask": CAUSAL}),
    ("decoder", decoder(), (seq(T), seq(S)), {"tgt_mask": CAUSAL}),
    ("decoder-causal-detected", decoder(3, False, batch_first=True), (seq(T, True), seq(S, True)),
     {"tgt_mask": np.where(CAUSAL, -np.inf, 0.0), "memory_key_padding_mask": MEM_KPM}),
    ("transformer", transformer(), (seq(S), seq(T)), {"tgt_mask": CAUSAL}),
    ("transformer-batch_first-norm_first", transformer(batch_first=True, norm_first=True, activation="gelu"),
     (seq(S, True), seq(T, True)),
     {"tgt_mask": np.where(CAUSAL, -np.inf, 0.0), "src_key_padding_mask": MEM_KPM,
      "tgt_key_padding_mask": TGT_KPM, "memory_key_padding_mask": MEM_KPM}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_float64(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("layer-all-masks", "transformer")], ids=lambda c: c[0])
def test_matches_torch_float32(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs, dtype=np.float32)


def test_eval_mode_with_default_dropout():
    run_pair(lambda n: n.Transformer(D, HEADS, 1, 1, FF), (seq(S), seq(T)), {"tgt_mask": CAUSAL}, train=False)


@pytest.mark.parametrize("builder", [dec_layer(), dec_layer(bias=False), decoder(), transformer(),
                                     lambda n: n.Transformer(D, HEADS, 1, 2, FF, bias=False)],
                         ids=["layer", "layer-nobias", "decoder", "transformer", "transformer-nobias"])
def test_state_dict_layout_matches_torch(builder):
    assert_same_state_dict(builder)


def test_custom_encoder_and_decoder_and_the_mask_helper():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, HEADS, FF), 1)
    model = nn.Transformer(D, HEADS, custom_encoder=enc, custom_decoder=nn.TransformerDecoder(
        nn.TransformerDecoderLayer(D, HEADS, FF), 1))
    assert model.encoder is enc and len(model.decoder.layers) == 1
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


def test_default_init_is_xavier_uniform_like_torch():
    em.manual_seed(0)
    w = nn.Transformer(16, 2, 1, 1, 32).decoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


@pytest.mark.parametrize(("src_shape", "tgt_shape", "message"), [
    ((S, N, D), (T, N + 1, D), "batch sizes of src"),
    ((S, N, D), (T, N, D + 1), "feature sizes of src"),
])
def test_shape_errors_name_both_inputs(src_shape, tgt_shape, message):
    model = nn.Transformer(D, HEADS, 1, 1, FF)
    with pytest.raises(RuntimeError, match=message):
        model(em.randn(*src_shape), em.randn(*tgt_shape))
