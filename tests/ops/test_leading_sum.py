"""Sums over leading axes as a GEMV (ops/leading_sum.py), through `sum` and `sum_to_size` as a user reaches them:
values against float64 and PyTorch, shapes with keepdim, gradients of broadcast operands, and what falls back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.ops import leading_sum as ls


def _x(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, (0, 1), (1, 0), -3])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_over_leading_axes_matches_float64_and_pytorch(dtype, dim, keepdim):
    x = _x((16, 64, 96), dtype)
    assert ls.leading_sum(x, tuple(sorted(np.atleast_1d(dim) % 3)), keepdim) is not None  # the GEMV path
    got = em.tensor(x).sum(dim, keepdim=keepdim).numpy()
    want = torch.from_numpy(x).sum(dim, keepdim=keepdim).numpy()
    exact = x.astype(np.float64).sum(tuple(np.atleast_1d(dim) % 3), keepdims=keepdim)
    assert got.shape == want.shape and got.dtype == dtype
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, exact, rtol=tol, atol=tol * np.abs(x).sum(0).max())
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(x).sum(0).max())


def test_bias_and_broadcast_gradients_take_it():
    """A linear layer's bias gradient (sum over rows) and a broadcast operand's (sum_to_size) against PyTorch."""
    x, w, b = _x((16, 64, 128)), _x((384, 128), seed=1) * 0.1, _x((384,), seed=2)
    g = _x((16, 64, 384), seed=3)
    ex, ew, eb = (em.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    em.nn.functional.linear(ex, ew, eb).backward(em.tensor(g))
    torch.nn.functional.linear(tx, tw, tb).backward(torch.tensor(g))
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-5, atol=1e-4)
    row = em.tensor(_x((1, 64, 384), seed=4), requires_grad=True)
    trow = torch.tensor(row.detach().numpy(), requires_grad=True)
    (em.tensor(g) * row).sum().backward()
    (torch.tensor(g) * trow).sum().backward()
    np.testing.assert_allclose(row.grad.numpy(), trow.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_nan_and_inf_propagate():
    x = _x((64, 96))
    x[3, 5], x[7, 6], x[8, 6] = np.nan, np.inf, -np.inf
    x[9, 7] = np.inf
    got = em.tensor(x).sum(0).numpy()
    assert np.isnan(got[5]) and np.isnan(got[6]) and got[7] == np.inf
    np.testing.assert_allclose(np.delete(got, [5, 6, 7]), np.delete(x.astype(np.float64).sum(0), [5, 6, 7]),
                               rtol=2e-5, atol=1e-4)


def test_what_falls_back_to_numpy():
    assert ls.leading_sum(_x((8, 8)), (0,), False) is None  # few values
    assert ls.leading_sum(_x((64, 96)).astype(np.float16), (0,), False) is None  # float16: summed in float32
    assert ls.leading_sum(_x((96, 64)).T, (0,), False) is None  # not C-contiguous
    assert ls.leading_sum(_x((64, 96)), (1,), False) is None  # trailing axes: NumPy's pairwise sum
    assert ls.leading_sum(_x((64, 96)), (0, 1), False) is None  # every axis
    x = _x((96, 64)).T  # the fallbacks still give the sum
    np.testing.assert_allclose(em.tensor(x).sum(0).numpy(), x.astype(np.float64).sum(0), rtol=2e-5, atol=1e-4)
