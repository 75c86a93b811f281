"""The compiled float32 erf, GELU and GELU gradient (erf_compiled.py) give the NumPy path's values bit for bit,
through the ops (em.erf, gelu and its gradient) as a user calls them, specials and float16 included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.graph import codegen
from ember.ops import erf_compiled

pytest.importorskip("numba")


def _inputs(dtype=np.float32, n=40_000):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 3).astype(np.float32)  # above the compiled kernels' size floor
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.9999999, 1.0, 1.0000001, 4.0, -4.0, 30.0, -30.0]
    x[:len(specials)] = specials
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


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n", [40_000, 300_000])  # one block; several blocks, split over the batch threads
def test_compiled_erf_and_gelu_equal_the_numpy_path(dtype, n):
    x, g = _inputs(dtype, n)
    assert erf_compiled.gelu_compiled(np, x.astype(np.float32)) is not None  # the compiled path is taken
    np.testing.assert_array_equal(_run("auto", lambda: _erf(x)), _run("numpy", lambda: _erf(x)))
    for got, want in zip(_run("auto", lambda: _gelu_and_grad(x, g)), _run("numpy", lambda: _gelu_and_grad(x, g))):
        np.testing.assert_array_equal(got, want)


def test_compiled_gelu_matches_pytorch():
    x, g = _inputs()
    x = x[np.isfinite(x)]
    g = g.reshape(-1)[:x.size]
    y, gx = _gelu_and_grad(x, g)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=2e-6, atol=2e-6)  # erf within 3 ulp of 1, times |x|
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=2e-6, atol=2e-6)  # erf within 3 ulp of 1, times |x|


def test_other_dtypes_and_small_inputs_take_the_numpy_path():
    assert erf_compiled.erf_compiled(np, np.zeros(1 << 16, np.float64)) is None
    assert erf_compiled.gelu_compiled(np, np.zeros(16, np.float32)) is None
    assert erf_compiled.gelu_backward_compiled(np, np.zeros(1 << 16, np.float64), np.zeros(1 << 16, np.float32)) \
        is None
