"""float16/bfloat16 accumulate in float32 and return their own dtype, forward and backward, as PyTorch's opmath.

The op table checks every float row in both dtypes; these are the cases users met, end to end.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

from .helpers import np_to_torch, torch_to_np

TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16}
LOW = ("float16", "bfloat16")


def _pair(values: np.ndarray, dtype: str, requires_grad: bool = False) -> tuple:
    """The same low-precision values as an Ember and a torch tensor."""
    low = values.astype(em.get_default_dtype().np).astype(getattr(em, dtype).np)
    return em.tensor(low, requires_grad=requires_grad), np_to_torch(low).requires_grad_(requires_grad)


def _assert_matches(e: em.Tensor, t: torch.Tensor, rtol: float = 1e-2) -> None:
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), f"dtype {e.dtype} != torch {t.dtype}"
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64), torch_to_np(t), rtol=rtol, atol=0)


def test_bfloat16_sum_of_many_ones() -> None:
    """100,000 ones sum to PyTorch's 99,840 (float32 accumulation, rounded once), not 256."""
    s = em.ones(100000).bfloat16().sum()
    assert s.dtype == em.bfloat16
    assert float(s) == float(torch.ones(100000).bfloat16().sum()) == 99840.0


def test_bfloat16_mean_of_tenths() -> None:
    e, t = _pair(np.full(10000, 0.1), "bfloat16")
    _assert_matches(e.mean(), t.mean(), rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_statistics_of_values_near_300_stay_finite(dtype) -> None:
    """float16 mean/var/std/norm of values near 300 overflowed to inf; PyTorch's are finite."""
    e, t = _pair(300 + np.random.default_rng(0).standard_normal(2000), dtype)
    for name in ("mean", "var", "std"):
        _assert_matches(getattr(em, name)(e), getattr(torch, name)(t))
    _assert_matches(em.norm(e[:500]), torch.norm(t[:500]))
    assert np.isfinite(float(em.var(e)))


@pytest.mark.parametrize("dtype", LOW)
def test_matmul_returns_the_operands_dtype(dtype) -> None:
    a, ta = _pair(np.random.default_rng(1).standard_normal((4, 3000)), dtype)
    b, tb = _pair(np.random.default_rng(2).standard_normal((3000, 5)), dtype)
    _assert_matches(a @ b, ta @ tb)


@pytest.mark.parametrize("dtype", LOW)
def test_broadcast_gradient_is_summed_in_float32(dtype) -> None:
    """The backward of a low-precision op accumulates in float32 and returns the input's dtype."""
    x, tx = _pair(np.ones(1), dtype, requires_grad=True)
    ones, tones = _pair(np.ones(100000), dtype)
    (x * ones).sum().backward()
    (tx * tones).sum().backward()
    assert x.grad.dtype == x.dtype
    _assert_matches(x.grad, tx.grad, rtol=0)


def _assert_as_exact(e: em.Tensor, t: torch.Tensor, exact: torch.Tensor, rtol: float) -> None:
    """Ember's error against `exact` (float64 on the same values) is within rtol of its scale, or no larger than PyTorch's."""
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    ref = exact.detach().numpy()
    ours = np.abs(e.detach().numpy().astype(np.float64) - ref).max()
    theirs = np.abs(torch_to_np(t) - ref).max()
    assert ours <= max(theirs, rtol * np.abs(ref).max()), f"error {ours} (PyTorch's {theirs})"


@pytest.mark.parametrize("dtype", LOW)
def test_batchnorm1d_on_values_near_300(dtype) -> None:
    """A float16 BatchNorm1d gave zeros for inputs near 300: now the normalised values, as exact as PyTorch's or more."""
    data = 300 + np.random.default_rng(3).standard_normal((256, 4))
    ours, theirs = nn.BatchNorm1d(4).to(getattr(em, dtype)), torch.nn.BatchNorm1d(4).to(TORCH_DTYPE[dtype])
    exact = torch.nn.BatchNorm1d(4).double()
    x, tx = _pair(data, dtype)
    rtol = 2e-3 if dtype == "float16" else 1.6e-2
    _assert_as_exact(ours(x), theirs(tx), exact(tx.double()), rtol)
    for name in ("running_mean", "running_var"):
        _assert_as_exact(getattr(ours, name), getattr(theirs, name), getattr(exact, name), rtol)
    for m in (ours, theirs, exact):
        m.eval()
    _assert_as_exact(ours(x), theirs(tx), exact(tx.double()), rtol)


def test_bfloat16_layer_norm_is_as_accurate_as_pytorch() -> None:
    """bfloat16 layer_norm had an error of 0.2 where PyTorch's is 0.011 (against float64 on the same values)."""
    data = np.random.default_rng(4).standard_normal((8, 1024)) * 3 + 5
    x, tx = _pair(data, "bfloat16")
    exact = torch.nn.functional.layer_norm(tx.double(), (1024,)).numpy()
    ours = nn.functional.layer_norm(x, (1024,)).numpy().astype(np.float64)
    theirs = torch_to_np(torch.nn.functional.layer_norm(tx, (1024,)))
    assert np.abs(ours - exact).max() <= 1.5 * np.abs(theirs - exact).max()


@pytest.mark.parametrize("dtype", LOW)
def test_linear_and_cross_entropy_gradients(dtype) -> None:
    """A low-precision classifier step: loss and every gradient in the parameters' dtype, close to PyTorch's."""
    rng = np.random.default_rng(5)
    ours = nn.Linear(256, 10).to(getattr(em, dtype))
    theirs = torch.nn.Linear(256, 10).to(TORCH_DTYPE[dtype])
    with torch.no_grad():
        theirs.weight.copy_(np_to_torch(ours.weight.detach().numpy()))
        theirs.bias.copy_(np_to_torch(ours.bias.detach().numpy()))
    x, tx = _pair(rng.standard_normal((64, 256)), dtype)
    target = rng.integers(0, 10, 64)
    loss = nn.functional.cross_entropy(ours(x), em.tensor(target))
    tloss = torch.nn.functional.cross_entropy(theirs(tx), torch.tensor(target))
    loss.backward()
    tloss.backward()
    _assert_matches(loss, tloss, rtol=2e-2)
    for p, tp in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        assert p.grad.dtype == p.dtype
        np.testing.assert_allclose(p.grad.numpy().astype(np.float64), torch_to_np(tp.grad), rtol=5e-2,
                                   atol=2e-2 * float(np.abs(torch_to_np(tp.grad)).max()))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fused_products_round_once_as_torch(dtype) -> None:
    # addmm, addmv and baddbmm add the product before rounding, addbmm one batch at a time, addr after rounding the
    # outer product: PyTorch's CPU kernels, bit for bit
    rng = np.random.default_rng(0)
    c, a, b = rng.standard_normal((8, 6)), rng.standard_normal((8, 16)), rng.standard_normal((16, 6))
    v, w = rng.standard_normal(16), rng.standard_normal(6)
    results = []
    for lib in (torch, em):
        d = getattr(lib, dtype)
        tc, ta, tb, tv, tw = (lib.tensor(x).to(d) for x in (c, a, b, v, w))
        results.append([lib.addmm(tc, ta, tb, beta=0.5, alpha=2.0), lib.addmv(tc[:, 0], ta, tv),
                        lib.addr(tc, tc[:, 0], tw), lib.baddbmm(tc[None], ta[None], tb[None]),
                        lib.addbmm(tc, ta[None].expand(3, 8, 16), tb[None].expand(3, 16, 6), alpha=0.5)])
    for theirs, ours in zip(*results):
        np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
