"""The compiled float32 erf (erf.py) gives the NumPy path's values bit for bit, and the compiled exact GELU
and its gradient (gelu.py) are within PyTorch's accuracy of the exact values, through the ops (em.erf,
gelu and its gradient) as a user calls them, specials and float16 included."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf as exact_erf

import ember as em
from ember.graph import codegen
from ember.kernels import erf, gelu

pytest.importorskip("numba")

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.9999999, 1.0, 1.0000001, 4.0, -4.0, 5.5437, -5.5437,
            5.6, -5.6, 30.0, -30.0, 1e4, -1e4]


def _inputs(dtype=np.float32, n=40_000):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 3).astype(np.float32)  # above the compiled kernels' size floor
    x[:len(SPECIALS)] = SPECIALS
    g = rng.standard_normal(x.size).astype(np.float32)
    return x.astype(dtype).reshape(200, -1), g.astype(dtype).reshape(200, -1)


def _run(backend, fn):
    codegen.set_backend(backend)
    try:
        return fn()
    finally:
        codegen.set_backend(None)


def _erf(x):
    return em.erf(em.tensor(x)).numpy()


def _gelu_and_grad(x, g):
    t = em.tensor(x, requires_grad=True)
    y = em.nn.functional.gelu(t)
    y.backward(em.tensor(g))
    return y.detach().numpy(), t.grad.numpy()


def _exact_gelu_and_grad(x, g):
    x, g = x.astype(np.float64), g.astype(np.float64)
    cdf = 0.5 * (1.0 + exact_erf(x / math.sqrt(2.0)))
    with np.errstate(invalid="ignore"):
        return x * cdf, g * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n", [40_000, 300_000])  # one block; several blocks, split over the batch threads
def test_compiled_erf_equals_the_numpy_path(dtype, n):
    x, _ = _inputs(dtype, n)
    assert erf.erf_compiled(np, x.astype(np.float32)) is not None  # the compiled path is taken
    np.testing.assert_array_equal(_run("auto", lambda: _erf(x)), _run("numpy", lambda: _erf(x)))


@pytest.mark.parametrize("n", [40_000, 300_000])  # one thread; split over the batch threads
def test_compiled_gelu_and_gradient_are_within_pytorchs_accuracy(n):
    x, g = _inputs(np.float32, n)
    assert gelu.gelu_compiled(np, x) is not None  # the compiled path is taken
    y, gx = _run("auto", lambda: _gelu_and_grad(x, g))
    want_y, want_gx = _exact_gelu_and_grad(x, g)
    finite = np.isfinite(x)
    # erf within 4e-7 (PyTorch's GELU: 1.5e-7) times |x| / 2, plus float32 rounding of the result
    tol_y = 2.2e-7 * np.abs(x) + 1.2e-7 * np.abs(want_y)
    assert np.all(np.abs(y[finite] - want_y[finite]) <= tol_y[finite])
    tol_g = (2.5e-7 + 1.2e-7 * np.abs(want_gx)) * np.maximum(np.abs(g), 1.0)
    assert np.all(np.abs(gx[finite] - want_gx[finite]) <= tol_g[finite])
    # the far tails are exact: GELU(x) is -0 below -5.55 and x above 5.55 (erf is +-1 in float32 there)
    far = finite & (np.abs(x) > 5.6)
    np.testing.assert_array_equal(y[far], np.where(x[far] > 0, x[far], 0.0))
    # specials as on the NumPy path
    want_special = _run("numpy", lambda: _gelu_and_grad(x, g))
    for got, want in zip((y, gx), want_special):
        np.testing.assert_array_equal(got[~finite], want[~finite])


@pytest.mark.parametrize("backend", ["auto", "numpy"])
def test_gelu_matches_pytorch(backend):
    x, g = _inputs()
    x = x[np.isfinite(x)]
    g = g.reshape(-1)[:x.size]
    y, gx = _run(backend, lambda: _gelu_and_grad(x, g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=2e-6, atol=2e-6)  # both erfs within 4e-7, times |x|
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=2e-6, atol=2e-6)


def test_other_dtypes_and_small_inputs_take_the_numpy_path():
    assert erf.erf_compiled(np, np.zeros(1 << 16, np.float64)) is None
    assert gelu.gelu_compiled(np, np.zeros(16, np.float32)) is None
    assert gelu.gelu_compiled(np, np.zeros(1 << 16, np.float64)) is None
    assert gelu.gelu_backward_compiled(np, np.zeros(1 << 16, np.float64), np.zeros(1 << 16, np.float32)) \
        is None
