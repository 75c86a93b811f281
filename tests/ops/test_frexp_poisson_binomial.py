"""torch.frexp (values at the edges and the mantissa's gradient) and the top-level draws torch.poisson and
torch.binomial, against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -1e-3, 1234.5, math.inf, -math.inf, math.nan]
TINY = {"float16": 6e-8, "bfloat16": 1e-40, "float32": 1e-45, "float64": 5e-324}  # subnormals


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_frexp_matches_torch_at_the_edges(dtype):
    values = EDGES + [TINY[dtype], -TINY[dtype], float(torch.finfo(getattr(torch, dtype)).max)]
    b = torch.tensor(values, dtype=getattr(torch, dtype))
    a = em.tensor(b.float().numpy() if dtype == "bfloat16" else b.numpy(), dtype=getattr(em, dtype))
    mantissa, exponent = em.frexp(a)
    want = torch.frexp(b)
    assert mantissa.dtype == a.dtype and exponent.dtype == em.int32
    np.testing.assert_array_equal(exponent.numpy(), want.exponent.numpy())
    np.testing.assert_array_equal(mantissa.float().numpy(), want.mantissa.float().numpy())
    assert np.array_equal(np.signbit(mantissa.float().numpy()), np.signbit(want.mantissa.float().numpy()))
    assert a.frexp().exponent.tolist() == exponent.tolist()
    assert mantissa.float().numpy()[0] == 0 and em.frexp(a).mantissa is not None  # a named pair, as torch's


def test_frexp_gradient_matches_torch():
    values = [0.3, -7.0, 1e-3, 0.0, 1e30, 1e-40]
    a = em.tensor(values, requires_grad=True)
    b = torch.tensor(values, requires_grad=True)
    (em.frexp(a).mantissa * em.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).sum().backward()
    (torch.frexp(b).mantissa * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    assert not em.frexp(a).exponent.requires_grad


def test_frexp_refuses_integers_and_runs_on_meta():
    with pytest.raises(TypeError, match="frexp: input must be floating point, got int64"):
        em.frexp(em.tensor([1, 2]))
    m, e = em.frexp(em.empty(2, 3, device="meta"))
    assert m.shape == e.shape == (2, 3) and e.dtype == em.int32


def test_poisson_draws():
    em.manual_seed(0)
    rates = em.tensor([0.0, 0.5, 4.0, 100.0]).expand(20000, 4)
    draws = em.poisson(rates)
    assert draws.dtype == em.float32 and draws.shape == (20000, 4)
    counts = draws.numpy()
    assert (counts[:, 0] == 0).all() and (counts == np.floor(counts)).all() and (counts >= 0).all()
    np.testing.assert_allclose(counts.mean(0)[1:], [0.5, 4.0, 100.0], rtol=0.03)
    np.testing.assert_allclose(counts.var(0)[1:], [0.5, 4.0, 100.0], rtol=0.06)
    g1, g2 = em.Generator().manual_seed(3), em.Generator().manual_seed(3)
    assert em.poisson(rates[:5], generator=g1).tolist() == em.poisson(rates[:5], generator=g2).tolist()
    assert em.poisson(em.tensor([2.0], dtype=em.float64)).dtype == em.float64
    with pytest.raises(ValueError, match="poisson: invalid Poisson rate"):
        em.poisson(em.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="poisson: invalid Poisson rate"):
        em.poisson(em.tensor([float("nan")]))
    with pytest.raises(TypeError, match="poisson: rates must be floating point, got ember.int64"):
        em.poisson(em.tensor([1, 2]))
    with pytest.raises(RuntimeError):  # PyTorch refuses integer rates too
        torch.poisson(torch.tensor([1, 2]))


def test_binomial_draws():
    em.manual_seed(0)
    count = em.tensor([[0.0], [10.0], [50.0]])
    prob = em.tensor([0.0, 0.3, 1.0])
    draws = em.binomial(count.expand(3, 3).contiguous(), prob.expand(3, 3).contiguous())
    assert draws.shape == (3, 3) and draws.dtype == em.float32
    np.testing.assert_array_equal(draws.numpy()[:, 0], [0, 0, 0])
    np.testing.assert_array_equal(draws.numpy()[:, 2], [0, 10, 50])
    many = em.binomial(em.full((20000,), 10.0), em.full((20000,), 0.3)).numpy()
    assert 0 <= many.min() and many.max() <= 10
    assert abs(many.mean() - 3.0) < 0.05 and abs(many.var() - 2.1) < 0.1
    with pytest.raises(ValueError, match=r"binomial: prob must be in \[0, 1\]"):
        em.binomial(em.tensor([3.0]), em.tensor([1.5]))
    with pytest.raises(ValueError, match="binomial: count must be non-negative"):
        em.binomial(em.tensor([-1.0]), em.tensor([0.5]))
    with pytest.raises(TypeError, match="binomial: count and prob must be floating point of one dtype"):
        em.binomial(em.tensor([3.0]), em.tensor([0.5], dtype=em.float64))
