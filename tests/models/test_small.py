"""The small models: shapes, parameter counts, a training step each, and the language model's sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import models
from ember.models.cifar_resnet import CifarBasicBlock
from ember.models.transformer_lm import CausalSelfAttention
from ember.nn import functional as F


def train_step(model: em.nn.Module, inputs: tuple, target: em.Tensor, loss_fn=F.cross_entropy) -> tuple[float, float]:
    """One SGD step; the loss before and after it on the same batch."""
    opt = em.optim.SGD(model.parameters(), lr=0.05)
    loss = loss_fn(model(*inputs), target)
    opt.zero_grad()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"no gradient reached {name}"
    opt.step()
    with em.no_grad():
        after = loss_fn(model(*inputs), target)
    return float(loss), float(after)


def test_mlp_defaults_and_training_step():
    em.manual_seed(0)
    model = models.mlp()
    assert [tuple(p.shape) for p in model.parameters()] == [(512, 784), (512,), (256, 512), (256,), (10, 256), (10,)]
    assert sum(p.numel() for p in model.parameters()) == 535_818
    x, y = em.randn(16, 1, 28, 28), em.randint(0, 10, (16,))
    assert tuple(model(x).shape) == (16, 10)
    before, after = train_step(model, (x,), y)
    assert after < before


def test_mlp_options():
    model = models.mlp(in_features=20, hidden=(7,), num_classes=3, dropout=0.5)
    assert [tuple(p.shape) for p in model.parameters()] == [(7, 20), (7,), (3, 7), (3,)]
    assert any(isinstance(m, em.nn.Dropout) for m in model.modules())
    assert tuple(model(em.randn(4, 20)).shape) == (4, 3)


def test_lenet5_structure_and_training_step():
    em.manual_seed(0)
    model = models.lenet5()
    assert sum(p.numel() for p in model.parameters()) == 61_706
    assert [tuple(p.shape) for p in model.parameters()][::2] == [(6, 1, 5, 5), (16, 6, 5, 5), (120, 400), (84, 120),
                                                                 (10, 84)]
    x, y = em.randn(8, 1, 28, 28), em.randint(0, 10, (8,))
    before, after = train_step(model, (x,), y)
    assert after < before


@pytest.mark.parametrize("in_channels,size", [(3, 32), (1, 8), (1, (12, 16))])
def test_lenet5_adapts_to_input(in_channels, size):
    model = models.lenet5(num_classes=4, in_channels=in_channels, input_size=size)
    h, w = (size, size) if isinstance(size, int) else size
    assert tuple(model(em.randn(2, in_channels, h, w)).shape) == (2, 4)
    with pytest.raises(ValueError, match="too small"):
        models.lenet5(input_size=3)


def test_resnet20_option_a_and_b():
    a = models.resnet20()
    assert sum(p.numel() for p in a.parameters()) == 269_722  # the paper's 0.27M
    b = models.resnet20(shortcut="B")
    # Option B adds two 1x1 projections with batch norm: 16->32 and 32->64.
    assert sum(p.numel() for p in b.parameters()) == 269_722 + (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)
    convs = [m for m in a.modules() if isinstance(m, em.nn.Conv2d)]
    assert len(convs) == 19  # 1 stem + 3 stages x 3 blocks x 2, plus the fc: 20 weighted layers
    with pytest.raises(ValueError, match="shortcut"):
        models.resnet20(shortcut="C")


def test_resnet20_option_a_shortcut_pads_channels():
    block = CifarBasicBlock(16, 32, stride=2)
    x = em.randn(1, 16, 8, 8)
    s = block.shortcut(x).numpy()
    assert s.shape == (1, 32, 4, 4)
    np.testing.assert_array_equal(s[:, 8:24], x.numpy()[:, :, ::2, ::2])
    assert not s[:, :8].any() and not s[:, 24:].any()


@pytest.mark.parametrize("build,in_channels", [(models.resnet20, 3), (models.resnet20, 1), (models.resnet18_cifar, 3)])
def test_cifar_resnets_train(build, in_channels):
    em.manual_seed(0)
    model = build(num_classes=10, in_channels=in_channels)
    x, y = em.randn(4, in_channels, 32, 32), em.randint(0, 10, (4,))
    assert tuple(model(x).shape) == (4, 10)
    before, after = train_step(model, (x,), y)
    assert math.isfinite(before) and math.isfinite(after)


def test_resnet18_cifar_shares_resnet18_names():
    cifar = models.resnet18_cifar(num_classes=10).state_dict()
    with em.device("meta"):
        imagenet = models.resnet18(num_classes=10).state_dict()
    assert list(cifar) == list(imagenet)
    assert tuple(cifar["conv1.weight"].shape) == (64, 3, 3, 3)
    assert sum(v.numel() for k, v in cifar.items() if "running" not in k and "num_batches" not in k) == 11_173_962


# --- transformer_lm ---------------------------------------------------------------------------
def test_transformer_lm_shapes_tying_and_training_step():
    em.manual_seed(0)
    model = models.transformer_lm(vocab_size=30, block_size=16, n_layer=2, n_head=4, n_embd=32)
    assert model.lm_head.weight is model.transformer.wte.weight
    n = sum(p.numel() for p in model.parameters())
    per_block = 2 * 2 * 32 + (32 * 96 + 96) + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32)
    assert n == 30 * 32 + 16 * 32 + 2 * per_block + 2 * 32
    untied = models.transformer_lm(vocab_size=30, block_size=16, n_embd=32, tie_weights=False)
    assert sum(p.numel() for p in untied.parameters()) == n + 30 * 32
    idx = em.randint(0, 30, (3, 16))
    logits = model(idx)
    assert tuple(logits.shape) == (3, 16, 30)

    def lm_loss(out, target):
        return F.cross_entropy(out.reshape(-1, 30), target.reshape(-1))

    before, after = train_step(model, (idx[:, :-1],), idx[:, 1:], lm_loss)
    assert after < before
    with pytest.raises(ValueError, match="block_size"):
        model(em.randint(0, 30, (1, 17)))


def test_transformer_lm_is_causal():
    em.manual_seed(0)
    model = models.transformer_lm(vocab_size=11, block_size=8, n_embd=16, n_head=2).eval()
    a = em.randint(0, 11, (1, 8))
    b = a.clone()
    b[0, 5] = (int(a[0, 5]) + 1) % 11
    with em.no_grad():
        la, lb = model(a).numpy(), model(b).numpy()
    np.testing.assert_allclose(la[:, :5], lb[:, :5], atol=1e-6)
    assert not np.allclose(la[:, 5:], lb[:, 5:])


def test_causal_self_attention_matches_torch():
    em.manual_seed(0)
    attn = CausalSelfAttention(16, 4)
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    w_attn, b_attn = attn.c_attn.weight.detach().numpy(), attn.c_attn.bias.detach().numpy()
    w_proj, b_proj = attn.c_proj.weight.detach().numpy(), attn.c_proj.bias.detach().numpy()
    t = torch.from_numpy(x) @ torch.from_numpy(w_attn).T + torch.from_numpy(b_attn)
    q, k, v = (z.reshape(2, 5, 4, 4).transpose(1, 2) for z in t.split(16, dim=2))
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 16)
    expected = (y @ torch.from_numpy(w_proj).T + torch.from_numpy(b_proj)).numpy()
    np.testing.assert_allclose(attn(em.tensor(x)).detach().numpy(), expected, atol=1e-5)


def test_generate():
    em.manual_seed(0)
    model = models.transformer_lm(vocab_size=13, block_size=8, n_embd=16, n_head=2).eval()
    prompt = em.randint(0, 13, (2, 3))
    out = model.generate(prompt, 12)  # runs past block_size: only the last 8 tokens condition a step
    assert tuple(out.shape) == (2, 15) and out.dtype == em.int64
    np.testing.assert_array_equal(out.numpy()[:, :3], prompt.numpy())
    assert out.numpy().min() >= 0 and out.numpy().max() < 13
    greedy = model.generate(prompt, 5, temperature=0)
    np.testing.assert_array_equal(greedy.numpy(), model.generate(prompt, 5, temperature=0).numpy())
    np.testing.assert_array_equal(model.generate(prompt, 5, top_k=1).numpy(), greedy.numpy())
    with em.no_grad():
        first = em.argmax(model(prompt)[:, -1, :], dim=-1).numpy()
    np.testing.assert_array_equal(greedy.numpy()[:, 3], first)
    g1, g2 = em.Generator().manual_seed(5), em.Generator().manual_seed(5)
    np.testing.assert_array_equal(model.generate(prompt, 6, top_k=4, generator=g1).numpy(),
                                  model.generate(prompt, 6, top_k=4, generator=g2).numpy())


# --- ncf and lstm_classifier ------------------------------------------------------------------
def test_ncf_shapes_count_and_training_step():
    em.manual_seed(0)
    model = models.ncf(num_users=20, num_items=30, embed_dim=8, hidden=(16, 8, 4))
    n = (20 + 30) * 8 + (20 + 30) * 8 + (16 * 8 + 8) + (8 * 4 + 4) + (8 + 4 + 1)
    assert sum(p.numel() for p in model.parameters()) == n
    users, items = em.randint(0, 20, (32,)), em.randint(0, 30, (32,))
    labels = em.randint(0, 2, (32,)).float()
    assert tuple(model(users, items).shape) == (32,)
    before, after = train_step(model, (users, items), labels, F.binary_cross_entropy_with_logits)
    assert after < before
    with pytest.raises(ValueError, match="even"):
        models.ncf(5, 5, hidden=(15, 8))


needs_lstm = pytest.mark.skipif(not hasattr(em.nn, "LSTM"), reason="ember.nn.LSTM is not available in this build")


@needs_lstm
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_lstm_classifier(bidirectional, num_layers):
    em.manual_seed(0)
    model = models.lstm_classifier(50, embed_dim=8, hidden_size=12, num_classes=3, num_layers=num_layers,
                                   bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    lstm = d * sum(4 * 12 * (i + 12) + 8 * 12 for i in [8] + [12 * d] * (num_layers - 1))
    assert sum(p.numel() for p in model.parameters()) == 50 * 8 + lstm + (12 * d * 3 + 3)
    tokens, y = em.randint(0, 50, (4, 7)), em.randint(0, 3, (4,))
    assert tuple(model(tokens).shape) == (4, 3)
    before, after = train_step(model, (tokens,), y)
    assert after < before


def test_lstm_classifier_without_lstm_says_so(monkeypatch):
    monkeypatch.delattr(em.nn, "LSTM", raising=False)
    with pytest.raises(NotImplementedError, match="LSTM"):
        models.lstm_classifier(10)
