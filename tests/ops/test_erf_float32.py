"""float32 erf (vectorised, no SciPy) is within 3 ulp of the float64 error function everywhere, specials included;
GELU's one-op gradient equals its composite rule."""

import math

import numpy as np

import ember as em
from ember.ops._special import _erf_float32


def test_erf_float32_within_3_ulp():
    x = np.concatenate([np.linspace(-12, 12, 400_001), np.logspace(-40, 1.1, 20_000), -np.logspace(-40, 1.1, 20_000),
                        [0.9999999, 1.0, 1.0000001, 1.9999999, 2.0, 2.0000002, 3.9, 9.9]]).astype(np.float32)
    got = _erf_float32(x).astype(np.float64)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 3, (ulps.max(), x[ulps.argmax()])


def test_erf_float32_specials_and_dtype():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -20.0], np.float32)
    got = em.erf(em.tensor(x)).numpy()
    assert got.dtype == np.float32
    assert np.isnan(got[0]) and list(got[1:3]) == [1.0, -1.0]
    assert got[3] == 0 and not np.signbit(got[3]) and got[4] == 0 and np.signbit(got[4])
    assert got[5] == np.float32(1e-30 * 2 / math.sqrt(math.pi)) and got[6] == -1.0


def test_zero_dim_float32_erf_and_gelu_equal_their_one_element_values():
    for v in (0.5, -2.0, 3.7, 0.0):
        one = em.tensor(np.array([v], np.float32))
        scalar = em.tensor(np.float32(v))
        assert scalar.erf().shape == () and scalar.erf().item() == one.erf().item()
        assert em.nn.functional.gelu(scalar).item() == em.nn.functional.gelu(one).item()


def test_gelu_gradient_is_one_op_equal_to_the_composite_rule():
    """Without create_graph GELU's gradient is the gelu_backward op, bit for bit the composite rule's."""
    for approximate in ("none", "tanh"):
        for dtype in (np.float32, np.float64):
            x = np.random.default_rng(0).standard_normal((64, 33)).astype(dtype) * 3
            t = em.tensor(x, requires_grad=True)
            with em.profiler.profile() as prof:
                (g,) = em.autograd.grad(em.nn.functional.gelu(t, approximate=approximate).sum(), [t])
            assert "gelu_backward" in prof.table()
            t2 = em.tensor(x, requires_grad=True)
            (composite,) = em.autograd.grad(em.nn.functional.gelu(t2, approximate=approximate).sum(), [t2],
                                            create_graph=True)  # records the composite rule
            np.testing.assert_array_equal(g.numpy(), composite.detach().numpy())
