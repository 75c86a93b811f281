"""The vectorised float32 sigmoid and tanh that compiled kernels inline (exp_compiled.py) are within a few
ulps of float64 over the float32 range (sigmoid below -87 within 1e-38), keep NaN, saturate at +-inf, and
are accurate near zero."""

import numpy as np
import pytest

pytest.importorskip("numba")

from ember.graph.codegen.numba_cpu import compiled_function  # noqa: E402
from ember.kernels import exp as exp_compiled  # noqa: E402

_LOOPS = exp_compiled.SOURCE + '''

def apply_sigmoid(x, out):
    for k in range(x.size):
        out[k] = sigmoid32(x[k])


def apply_tanh(x, out):
    for k in range(x.size):
        out[k] = tanh32(x[k])
'''


def _inputs():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.standard_normal(50_000) * 10, rng.standard_normal(20_000) * 1e-3,
                           np.linspace(-120, 120, 40_001), [1e-30, -1e-30, 5e-8, 87.5, -87.5, 88.9, -88.9]]
                          ).astype(np.float32)


def _ulps(got, want):
    """|got - want| in units of float32 spacing at want (want in float64; tiny values count from 1e-38)."""
    spacing = np.spacing(np.maximum(np.abs(want), 1e-38).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("name, exact", [("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("tanh", np.tanh)])
def test_within_three_ulps_of_float64(name, exact):
    fn = compiled_function(_LOOPS, f"apply_{name}")
    x = _inputs()
    out = np.empty_like(x)
    fn(x, out)
    with np.errstate(over="ignore"):
        want = exact(x.astype(np.float64))
    normal = np.abs(want) >= 1.2e-38  # where sigmoid's exact value is tiny, within 1e-38 of it
    assert _ulps(out[normal], want[normal]).max() <= 3.0
    assert np.abs(out[~normal] - want[~normal]).max(initial=0) < 1e-38


@pytest.mark.parametrize("name, special", [
    ("sigmoid", {np.inf: 1.0, -np.inf: 0.0, 0.0: 0.5}),
    ("tanh", {np.inf: 1.0, -np.inf: -1.0, 0.0: 0.0, 20.0: 1.0, -20.0: -1.0}),
])
def test_nan_infinities_and_saturation(name, special):
    fn = compiled_function(_LOOPS, f"apply_{name}")
    x = np.array([np.nan] + list(special), np.float32)
    out = np.empty_like(x)
    fn(x, out)
    assert np.isnan(out[0])
    np.testing.assert_allclose(out[1:], list(special.values()), rtol=0, atol=1e-37)
