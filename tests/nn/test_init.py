"""nn.init and every layer's default initialisation, checked statistically (bounds, mean, std) against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.nn import init

tnn = torch.nn


def _values(t) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _check_uniform(values: np.ndarray, bound: float) -> None:
    assert np.abs(values).max() <= bound * (1 + 1e-6)
    assert np.abs(values).max() > 0.95 * bound  # the whole range is used
    assert abs(values.std() - bound / math.sqrt(3)) < 0.03 * bound
    assert abs(values.mean()) < 0.03 * bound


def _check_normal(values: np.ndarray, std: float, mean: float = 0.0) -> None:
    assert abs(values.std() - std) < 0.03 * std
    assert abs(values.mean() - mean) < 0.03 * std + 1e-12


@pytest.mark.parametrize("name", ["linear", "conv1d", "conv2d", "conv_transpose2d", "sigmoid", "tanh", "relu",
                                  "leaky_relu", "selu"])
def test_calculate_gain(name) -> None:
    assert init.calculate_gain(name) == pytest.approx(tnn.init.calculate_gain(name))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(tnn.init.calculate_gain("leaky_relu", 0.2))


def test_calculate_gain_errors() -> None:
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", True)


def test_fan_computation() -> None:
    assert init._calculate_fan_in_and_fan_out(em.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(em.empty(5))


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)])
def test_xavier_and_kaiming(shape) -> None:
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(em.empty(*shape))
    t = em.empty(*shape)
    init.xavier_uniform_(t, gain=2.0)
    _check_uniform(_values(t), 2.0 * math.sqrt(6.0 / (fan_in + fan_out)))
    init.xavier_normal_(t)
    _check_normal(_values(t), math.sqrt(2.0 / (fan_in + fan_out)))
    init.kaiming_uniform_(t)  # leaky_relu with a=0: gain sqrt(2)
    _check_uniform(_values(t), math.sqrt(6.0 / fan_in))
    init.kaiming_uniform_(t, a=math.sqrt(5))
    _check_uniform(_values(t), 1 / math.sqrt(fan_in))
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    _check_normal(_values(t), math.sqrt(2.0 / fan_out))
    init.kaiming_normal_(t, a=0.1, mode="fan_in", nonlinearity="leaky_relu")
    _check_normal(_values(t), math.sqrt(2.0 / (1 + 0.01)) / math.sqrt(fan_in))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(t, mode="fan_avg")


def test_basic_fills() -> None:
    t = em.empty(200, 300)
    assert init.uniform_(t, -2.0, 3.0) is t
    v = _values(t)
    assert v.min() >= -2.0 and v.max() < 3.0 and abs(v.mean() - 0.5) < 0.05
    init.normal_(t, 1.0, 0.5)
    _check_normal(_values(t), 0.5, 1.0)
    init.constant_(t, 0.3)
    assert np.all(_values(t) == np.float32(0.3))
    init.zeros_(t)
    assert not np.any(_values(t))
    init.ones_(t)
    assert np.all(_values(t) == 1)


def test_init_is_in_place_and_not_recorded() -> None:
    p = nn.Parameter(em.empty(3, 4))
    for fn in (init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_, init.trunc_normal_,
               init.orthogonal_, init.eye_, init.zeros_):
        out = fn(p)
        assert out is p and p.is_leaf and p.requires_grad and p.grad_fn is None


def test_trunc_normal() -> None:
    t = em.empty(400, 250)
    init.trunc_normal_(t, mean=0.5, std=2.0, a=-1.0, b=3.0)
    v = _values(t)
    assert v.min() >= -1.0 and v.max() <= 3.0
    # moments of N(0.5, 2^2) truncated to [-1, 3]: compare with PyTorch's own draws
    ref = tnn.init.trunc_normal_(torch.empty(400, 250), mean=0.5, std=2.0, a=-1.0, b=3.0).numpy()
    assert abs(v.mean() - ref.mean()) < 0.02 and abs(v.std() - ref.std()) < 0.02
    init.trunc_normal_(t, std=0.02)
    assert np.abs(_values(t)).max() <= 2.0 and abs(_values(t).std() - 0.02) < 0.001


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 2, 3, 3)])
def test_orthogonal(shape) -> None:
    t = em.empty(*shape)
    init.orthogonal_(t, gain=2.0)
    w = _values(t).reshape(shape[0], -1)
    rows, cols = w.shape
    gram = w @ w.T if rows <= cols else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-5)
    with pytest.raises(ValueError):
        init.orthogonal_(em.empty(3))


def test_eye_and_dirac_match_torch() -> None:
    np.testing.assert_array_equal(_values(init.eye_(em.empty(3, 5))), tnn.init.eye_(torch.empty(3, 5)).numpy())
    for shape, groups in [((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((4, 4, 1, 3, 3), 1)]:
        np.testing.assert_array_equal(_values(init.dirac_(em.empty(*shape), groups)),
                                      tnn.init.dirac_(torch.empty(*shape), groups).numpy())


def test_sparse() -> None:
    t = init.sparse_(em.empty(20, 30), sparsity=0.3, std=0.5)
    zeros_per_col = (_values(t) == 0).sum(0)
    assert np.all(zeros_per_col >= 6)


def test_generator_makes_init_reproducible() -> None:
    a = init.kaiming_uniform_(em.empty(4, 5), generator=em.Generator().manual_seed(3))
    b = init.kaiming_uniform_(em.empty(4, 5), generator=em.Generator().manual_seed(3))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    em.manual_seed(7)
    c = nn.Linear(4, 5).weight.detach().numpy().copy()
    em.manual_seed(7)
    d = nn.Linear(4, 5).weight.detach().numpy()
    np.testing.assert_array_equal(c, d)


# --- default initialisation of every layer, compared with PyTorch's -------------------------------------------
def _pooled_samples(module, min_count: int = 4000) -> dict:
    """Each parameter's values over enough re-initialisations to have min_count samples."""
    samples = {n: [] for n, _ in module.named_parameters()}
    count = 0
    while count < min_count:
        module.reset_parameters()
        for n, p in module.named_parameters():
            samples[n].append(_values(p).reshape(-1))
        count += min(p.numel() for p in module.parameters())
    return {n: np.concatenate(v) for n, v in samples.items()}


DEFAULT_INIT_CASES = [
    ("linear", lambda n: n.Linear(300, 20)),
    ("conv1d", lambda n: n.Conv1d(40, 16, 5)),
    ("conv2d", lambda n: n.Conv2d(32, 16, 3)),
    ("conv2d-groups", lambda n: n.Conv2d(32, 16, 3, groups=4)),
    ("convT2d", lambda n: n.ConvTranspose2d(32, 48, 4, groups=2)),
    ("convT1d", lambda n: n.ConvTranspose1d(32, 48, 4)),
    ("bilinear", lambda n: n.Bilinear(30, 20, 40)),
    ("embedding", lambda n: n.Embedding(100, 64)),
    ("batchnorm", lambda n: n.BatchNorm2d(16)),
    ("layernorm", lambda n: n.LayerNorm(16)),
    ("groupnorm", lambda n: n.GroupNorm(4, 16)),
    ("rmsnorm", lambda n: n.RMSNorm(16)),
    ("prelu", lambda n: n.PReLU(8)),
]
QUANTILES = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]


@pytest.mark.parametrize(("name", "build"), DEFAULT_INIT_CASES, ids=[c[0] for c in DEFAULT_INIT_CASES])
def test_default_init_matches_torch(name, build) -> None:
    em.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = _pooled_samples(build(nn)), _pooled_samples(build(tnn))
    assert list(ours) == list(theirs)
    for key in ours:
        a, b = ours[key], theirs[key]
        if b.std() == 0:  # constant fills (norm weights and biases, PReLU)
            np.testing.assert_array_equal(a, b)
            continue
        assert abs(a.std() - b.std()) < 0.05 * b.std(), key
        qa, qb = np.quantile(a, QUANTILES), np.quantile(b, QUANTILES)
        inner = slice(2, -2) if name == "embedding" else slice(None)  # a normal's tails are noisy
        np.testing.assert_allclose(qa[inner], qb[inner], atol=0.1 * b.std(), err_msg=key)


def test_default_bounds_follow_fan_in() -> None:
    lin = nn.Linear(300, 200)
    _check_uniform(_values(lin.weight), 1 / math.sqrt(300))
    assert np.abs(_values(lin.bias)).max() <= 1 / math.sqrt(300)
    conv = nn.Conv2d(32, 64, 3)
    _check_uniform(_values(conv.weight), 1 / math.sqrt(32 * 9))
    convt = nn.ConvTranspose2d(32, 48, 4, groups=2)  # PyTorch uses the weight's dim 1 (out/groups) as fan_in
    _check_uniform(_values(convt.weight), 1 / math.sqrt(24 * 16))
    emb = nn.Embedding(400, 64)
    _check_normal(_values(emb.weight), 1.0)
