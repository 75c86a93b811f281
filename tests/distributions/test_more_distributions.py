"""InverseGamma, GeneralizedPareto, LogisticNormal, LKJCholesky and Wishart against torch.distributions: log_prob,
entropy, moments, cdf/icdf and their gradients in float64 and float32, shapes and expand, samples (PyTorch's own
draws where Ember shares the sampler, moments within a few standard errors otherwise), rsample's gradients, KL,
and the errors for bad parameters and values."""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

from .test_against_torch import _build, _grads, _np, check_rsample_and_expand
from .test_sampling import check_reproducible

# torch 2.13 warns on every Wishart draw (pytorch/pytorch#122021), and a low df warns by design
pytestmark = [pytest.mark.filterwarnings("ignore:Singular sample detected:UserWarning"),
              pytest.mark.filterwarnings("ignore:Low df values detected:UserWarning")]
RNG = np.random.default_rng(21)
B = (2, 3)


def _pos(shape, lo=0.5, hi=2.5):
    return RNG.uniform(lo, hi, shape)


def _cov(a):
    """A positive-definite matrix built from a free one (gradients need no symmetrisation rule)."""
    return a @ a.mT + (a[..., 0, :] * 0 + 0.5).diag_embed()


def _tril(a):
    return a.tril(-1) + a.diagonal(dim1=-2, dim2=-1).exp().diag_embed()


def _corr_cholesky(shape, d):
    a = np.tril(RNG.standard_normal(shape + (d, d)))
    idx = np.arange(d)
    a[..., idx, idx] = np.abs(a[..., idx, idx]) + 0.3
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _spd(shape, d):
    a = RNG.standard_normal(shape + (d, d)) * 0.7
    return a @ np.swapaxes(a, -1, -2) + 0.4 * np.eye(d)


GP_CONC = np.array([[0.0, -0.4, 0.3], [1.2, -1.0, 0.6]])  # exponential, bounded, heavy, no mean, uniform, no variance
GP_LOC, GP_SCALE = RNG.standard_normal(B), _pos(B)
Q = RNG.uniform(0.05, 0.95, (5,) + B)

# (name, build(lib, *params), params, value, icdf probabilities or None)
CASES = [
    ("inverse_gamma", lambda D, a, r: D.InverseGamma(a, r), [np.array([[0.7, 1.5, 2.5], [3.0, 0.9, 4.0]]), _pos(B)],
     _pos((4,) + B, 0.1, 4), Q),
    ("inverse_gamma_bcast", lambda D, a, r: D.InverseGamma(a, r), [_pos(3, 2.5, 5), np.array(1.5)], _pos((2, 3)),
     None),
    ("generalized_pareto", lambda D, m, s, c: D.GeneralizedPareto(m, s, c), [GP_LOC, GP_SCALE, GP_CONC],
     GP_LOC + GP_SCALE * RNG.uniform(0.02, 0.9, (4,) + B), Q),
    ("logistic_normal", lambda D, m, s: D.LogisticNormal(m, s), [RNG.standard_normal(B), _pos(B)],
     RNG.dirichlet(np.ones(4), (5, 2)), None),
    ("logistic_normal_scalar", lambda D, m, s: D.LogisticNormal(m, s), [np.array(0.3), np.array(1.4)],
     RNG.dirichlet(np.ones(2), 5), None),
    ("lkj_3", lambda D, c: D.LKJCholesky(3, c), [np.array([0.5, 2.0])], _corr_cholesky((4, 2), 3), None),
    ("lkj_2", lambda D, c: D.LKJCholesky(2, c), [np.array(1.7)], _corr_cholesky((5,), 2), None),
    ("lkj_5", lambda D, c: D.LKJCholesky(5, c), [np.array([[1.0], [3.5]])], _corr_cholesky((2, 1), 5), None),
    ("wishart_cov", lambda D, df, a: D.Wishart(df, covariance_matrix=_cov(a)),
     [np.array([3.5, 6.0]), RNG.standard_normal((2, 3, 3)) * 0.5], _spd((4, 2), 3), None),
    ("wishart_precision", lambda D, df, a: D.Wishart(df, precision_matrix=_cov(a)),
     [np.array(4.2), RNG.standard_normal((3, 3)) * 0.5], _spd((3,), 3), None),
    ("wishart_scale_tril_bcast", lambda D, df, a: D.Wishart(df, scale_tril=_tril(a)),
     [np.array([[2.5], [7.0]]), RNG.standard_normal((2, 2, 2)) * 0.5], _spd((2, 2), 2), None),
]
_IDS = [c[0] for c in CASES]


@contextlib.contextmanager
def _torch_default_dtype(dtype):
    """torch's default dtype set to dtype: torch 2.13's GeneralizedPareto compares its concentration with a tensor of
    the default dtype, so its log_prob and cdf fail for float64 parameters otherwise."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@pytest.fixture(autouse=True)
def _torch_float64():
    with _torch_default_dtype("float64"):
        yield
_OWN_SAMPLERS = {"inverse_gamma", "inverse_gamma_bcast", "lkj_3", "lkj_2", "lkj_5", "wishart_cov",
                 "wishart_precision", "wishart_scale_tril_bcast"}


def _quantities(d, value, q):
    """name -> a thunk computing it, for every quantity the distribution may have."""
    out = {"mean": lambda: d.mean, "variance": lambda: d.variance, "stddev": lambda: d.stddev, "mode": lambda: d.mode,
           "entropy": lambda: d.entropy(), "log_prob": lambda: d.log_prob(value), "cdf": lambda: d.cdf(value),
           "perplexity": lambda: d.perplexity()}
    if q is not None:
        out["icdf"] = lambda: d.icdf(q)
    for attr in ("concentration", "rate", "loc", "scale", "df", "covariance_matrix", "precision_matrix",
                 "scale_tril"):
        out[attr] = (lambda a: lambda: getattr(d, a))(attr)
    return out


def _try(thunk):
    try:
        return thunk()
    except (NotImplementedError, AttributeError):
        return NotImplemented


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "build", "params", "value", "q"), CASES, ids=_IDS)
def test_matches_torch(name, build, params, value, q, dtype) -> None:
    """Each quantity torch has agrees (NaN and inf where torch's are), so do its gradients in every parameter;
    where torch raises NotImplementedError, so does Ember."""
    e, t, ep, tp = _build(build, params, dtype)
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape), name
    assert e.has_rsample == t.has_rsample and e.has_enumerate_support == t.has_enumerate_support, name
    rtol, atol = (1e-9, 1e-11) if dtype == "float64" else (2e-4, 2e-5)
    ev, tv = em.tensor(value, dtype=getattr(em, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
    eq = None if q is None else em.tensor(q, dtype=getattr(em, dtype))
    tq = None if q is None else torch.tensor(q, dtype=getattr(torch, dtype))
    checked = 0
    for what, thunk in _quantities(t, tv, tq).items():
        with _torch_default_dtype(dtype):
            got_t = _try(thunk)
        got_e = _try(_quantities(e, ev, eq)[what])
        if got_t is NotImplemented:
            assert got_e is NotImplemented, f"{name}.{what}: torch has none, Ember returned one"
            continue
        assert got_e is not NotImplemented, f"{name}.{what}: Ember has none"
        assert tuple(got_e.shape) == tuple(got_t.shape), f"{name}.{what}: shape {tuple(got_e.shape)} vs torch"
        np.testing.assert_allclose(_np(got_e), _np(got_t), rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{name}.{what} ({dtype})")
        checked += 1
        if dtype == "float64" and got_t.requires_grad:
            gt_all = _try(lambda: _grads(got_t, tp, torch))
            if gt_all is NotImplemented:  # torch's gammainc has no derivative in its shape parameter
                continue
            for k, (ge, gt) in enumerate(zip(_grads(got_e, ep, em), gt_all)):
                np.testing.assert_allclose(ge, gt, rtol=1e-8, atol=1e-10, equal_nan=True,
                                           err_msg=f"{name}: d {what} / d param {k}")
    assert checked >= 2, name  # at least log_prob and a parameter


@pytest.mark.parametrize(("name", "build", "params", "value", "q"), CASES, ids=_IDS)
def test_sample_shapes_expand_and_reproducibility(name, build, params, value, q) -> None:
    """Samples have torch's shapes and dtype, lie in the support and repeat under the same seed (and are torch's
    very draws where Ember samples as torch does); expand gives torch's batch shape and the same log_prob."""
    e, t, _, _ = _build(build, params, "float64")
    for shape in [(), (5,), (2, 3)]:
        se, st = e.sample(shape), t.sample(shape)
        assert tuple(se.shape) == tuple(st.shape) and se.dtype == em.float64 and not se.requires_grad, shape
        assert bool(e.support.check(se).all()), name
    check_reproducible(e, t, name, torchs_draws=name not in _OWN_SAMPLERS)
    check_rsample_and_expand(e, t, value, name)


@pytest.mark.parametrize("name", ["generalized_pareto", "logistic_normal"])
def test_rsample_gradients_match_torch(name) -> None:
    """Where Ember draws torch's numbers, rsample gives torch's values and gradients in every parameter."""
    _, build, params, _, _ = next(c for c in CASES if c[0] == name)
    e, t, ep, tp = _build(build, params, "float64")
    em.manual_seed(5)
    torch.manual_seed(5)
    xe, xt = e.rsample((2,)), t.rsample((2,))
    np.testing.assert_allclose(xe.detach().numpy(), xt.detach().numpy(), rtol=1e-11, atol=1e-13)
    for k, (a, b) in enumerate(zip(_grads(xe, ep, em), _grads(xt, tp, torch))):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"{name}: d rsample / d param {k}")


def test_inverse_gamma_rsample_gradient() -> None:
    """x = rate / g with g ~ Gamma(concentration, 1): dx/drate = x / rate exactly, and the concentration's implicit
    gradient averages to d E[x] / d a = -rate / (a - 1)^2."""
    a = em.tensor([4.0, 6.0], dtype=em.float64, requires_grad=True)
    rate = em.tensor([0.5, 2.0], dtype=em.float64, requires_grad=True)
    em.manual_seed(3)
    x = ed.InverseGamma(a, rate).rsample((40000,))
    ga, gr = em.autograd.grad(x.sum(), [a, rate])
    np.testing.assert_allclose(gr.numpy(), (x.detach() / rate.detach()).sum(0).numpy(), rtol=1e-10)
    expected = -rate.detach().numpy() / (a.detach().numpy() - 1) ** 2
    np.testing.assert_allclose(ga.numpy() / 40000, expected, rtol=0.06)


def _moments_ok(x, mean, var, name):
    """Sample mean and variance within 5 of their estimated standard errors of the given moments."""
    n = x.shape[0]
    m, v = x.mean(0), x.var(0)
    se_mean = np.sqrt(v / n)
    se_var = np.std((x - m) ** 2, axis=0) / np.sqrt(n)
    assert np.all(np.abs(m - mean) < 5 * se_mean + 1e-12), (name, m, mean)
    assert np.all(np.abs(v - var) < 5 * se_var + 1e-12), (name, v, var)


def test_sample_moments() -> None:
    """20000 draws: means and variances within a few standard errors of the distributions' own moments; the
    logistic-normal's draws map back to its normal's moments."""
    em.manual_seed(7)
    ig = ed.InverseGamma(em.tensor([5.0, 8.0, 12.0]), em.tensor([1.0, 3.0, 0.5]))
    _moments_ok(ig.sample((20000,)).numpy(), ig.mean.numpy(), ig.variance.numpy(), "inverse_gamma")
    gp = ed.GeneralizedPareto(em.tensor([0.0, 1.0, -2.0]), em.tensor([1.0, 0.5, 2.0]), em.tensor([-0.3, 0.0, 0.15]))
    _moments_ok(gp.sample((20000,)).numpy(), gp.mean.numpy(), gp.variance.numpy(), "generalized_pareto")
    loc, scale = em.tensor([0.5, -1.0, 0.0]), em.tensor([1.0, 0.3, 2.0])
    x = ed.LogisticNormal(loc, scale).sample((20000,))
    z = ed.StickBreakingTransform().inv(x).numpy()
    _moments_ok(z, loc.numpy(), scale.numpy() ** 2, "logistic_normal")
    w = ed.Wishart(em.tensor(6.0), covariance_matrix=em.tensor([[1.0, 0.3], [0.3, 0.5]]))
    draws = w.sample((20000,)).numpy()
    _moments_ok(draws.reshape(20000, 4), w.mean.numpy().reshape(4), w.variance.numpy().reshape(4), "wishart")


@pytest.mark.parametrize(("dim", "eta"), [(2, 1.0), (4, 0.5), (4, 2.0)])
def test_lkj_marginals(dim, eta) -> None:
    """Under LKJ(eta) in dimension d every correlation of L L^T is marginally 2 Beta(b, b) - 1 with b = eta - 1 +
    d / 2: mean 0, variance 1 / (2 eta + d - 1), for the first row and the last alike."""
    em.manual_seed(13)
    n = 20000
    lkj = ed.LKJCholesky(dim, em.tensor(eta))
    factor = lkj.sample((n,))
    assert bool(ed.constraints.corr_cholesky.check(factor).all())
    corr = (factor @ factor.mT).numpy()
    rows, cols = np.tril_indices(dim, -1)
    r = corr[:, rows, cols]
    var = 1 / (2 * eta + dim - 1)
    fourth = 3 / ((2 * eta + dim - 1) * (2 * eta + dim + 1))  # E r^4 of 2 Beta(b, b) - 1
    se_var = math.sqrt((fourth - var**2) / n)
    assert np.all(np.abs(r.mean(0)) < 5 * math.sqrt(var / n)), r.mean(0)
    assert np.all(np.abs((r**2).mean(0) - var) < 5 * se_var), ((r**2).mean(0), var)


def test_lkj_density_integrates_to_one() -> None:
    """For d = 2 the factor is [[1, 0], [r, sqrt(1 - r^2)]]: exp(log_prob) integrates to 1 over r in (-1, 1)."""
    r = np.linspace(-1, 1, 200001)[1:-1]
    value = np.zeros((r.size, 2, 2))
    value[:, 0, 0], value[:, 1, 0], value[:, 1, 1] = 1.0, r, np.sqrt(1 - r**2)
    for eta in (1.0, 2.5, 6.0):
        density = ed.LKJCholesky(2, eta).log_prob(em.tensor(value)).exp().numpy()
        assert abs(np.trapezoid(density, r) - 1) < 1e-4, eta


def test_wishart_rsample_gradients() -> None:
    """E[tr W] = df tr(L L^T): the sample average of d tr(W) / d L is 2 df L exactly in expectation (the Bartlett
    factor's A A^T has mean df I) and d / d df is tr(L L^T), through chi-squared's implicit gradient."""
    tril = np.array([[1.2, 0.0], [0.4, 0.7]])
    L = em.tensor(tril, requires_grad=True)  # noqa: N806
    df = em.tensor(5.0, dtype=em.float64, requires_grad=True)
    em.manual_seed(17)
    n = 20000
    w = ed.Wishart(df, scale_tril=L).rsample((n,))
    trace = w.diagonal(dim1=-2, dim2=-1).sum()
    g_l, g_df = em.autograd.grad(trace, [L, df])
    np.testing.assert_allclose(np.tril(g_l.numpy()) / n, 2 * 5.0 * tril, rtol=0.04, atol=0.04)
    np.testing.assert_allclose(g_df.item() / n, np.trace(tril @ tril.T), rtol=0.06)


def test_wishart_singular_draws_are_redrawn(monkeypatch) -> None:
    """A draw that is not positive definite is replaced (with a warning) and healthy draws raise none (torch 2.13
    warns on every draw: pytorch/pytorch#122021)."""
    w = ed.Wishart(em.tensor(4.0, dtype=em.float64), covariance_matrix=em.eye(2, dtype=em.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w.rsample((50,))
    original = w._bartlett_sampling
    calls = []

    def first_singular(sample_shape):
        out = original(sample_shape)
        calls.append(1)
        return out * 0 if len(calls) == 1 else out

    monkeypatch.setattr(w, "_bartlett_sampling", first_singular)
    with pytest.warns(UserWarning, match="Singular sample detected"):
        x = w.rsample((3,))
    assert len(calls) == 2 and bool(ed.constraints.positive_definite.check(x).all())


def test_wishart_number_df_and_low_df() -> None:
    """df given as a number: the moments of a batch equal those with df as a tensor; df in (dim - 1, dim) warns as
    torch does."""
    cov = _spd((3,), 2)
    a = ed.Wishart(5.0, covariance_matrix=em.tensor(cov))
    b = ed.Wishart(em.full((3,), 5.0, dtype=em.float64), covariance_matrix=em.tensor(cov))
    t = td.Wishart(torch.full((3,), 5.0, dtype=torch.float64), covariance_matrix=torch.tensor(cov))
    for what in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(a, what).numpy(), getattr(t, what).numpy(), rtol=1e-12)
        np.testing.assert_allclose(getattr(b, what).numpy(), getattr(t, what).numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.entropy().numpy(), t.entropy().numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="Low df values detected"):
        td.Wishart(torch.tensor(1.5), covariance_matrix=torch.eye(2))
    with pytest.warns(UserWarning, match="Low df values detected"):
        ed.Wishart(em.tensor(1.5), covariance_matrix=em.eye(2))


def test_generalized_pareto_special_cases() -> None:
    """concentration 0 is an exponential shifted to loc; -1 is uniform on [loc, loc + scale]."""
    x = em.tensor(RNG.uniform(0.1, 0.9, 7))
    f64 = [em.tensor(v, dtype=em.float64) for v in (0.05, 2.0, 0.0, 0.5, 1.0, -1.0)]
    gp0 = ed.GeneralizedPareto(f64[0], f64[1], f64[2])
    exponential = ed.Exponential(f64[3])
    np.testing.assert_allclose(gp0.log_prob(x).numpy(), exponential.log_prob(x - 0.05).numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp0.cdf(x).numpy(), exponential.cdf(x - 0.05).numpy(), rtol=1e-12)
    gp1 = ed.GeneralizedPareto(f64[2], f64[4], f64[5])
    np.testing.assert_allclose(gp1.log_prob(x).numpy(), 0.0, atol=1e-15)
    np.testing.assert_allclose(gp1.cdf(x).numpy(), x.numpy(), rtol=1e-12)
    for fn in ("log_survival_function", "log_cdf"):
        e = getattr(ed.GeneralizedPareto(em.tensor(GP_LOC), em.tensor(GP_SCALE), em.tensor(GP_CONC)), fn)
        t = getattr(td.GeneralizedPareto(torch.tensor(GP_LOC), torch.tensor(GP_SCALE), torch.tensor(GP_CONC)), fn)
        value = GP_LOC + GP_SCALE * 0.5
        np.testing.assert_allclose(e(em.tensor(value)).numpy(), t(torch.tensor(value)).numpy(), rtol=1e-12)


def _kl_pairs():
    a1, a2 = RNG.standard_normal((2, 3, 3)) * 0.5, RNG.standard_normal((2, 3, 3)) * 0.5
    return [
        ("inverse_gamma", lambda D, a, r: D.InverseGamma(a, r), [_pos(3), _pos(3)], [_pos(3), _pos(3)]),
        ("logistic_normal", lambda D, m, s: D.LogisticNormal(m, s), [RNG.standard_normal((2, 3)), _pos((2, 3))],
         [RNG.standard_normal((2, 3)), _pos((2, 3))]),
        ("wishart", lambda D, df, a: D.Wishart(df, covariance_matrix=_cov(a)), [np.array(4.5), a1[0]],
         [np.array(7.0), a2[0]]),
        ("wishart_tril", lambda D, df, a: D.Wishart(df, scale_tril=_tril(a)), [np.array(3.0), a1[1]],
         [np.array(2.2), a2[1]]),
    ]


@pytest.mark.parametrize("case", _kl_pairs(), ids=lambda c: c[0])
def test_kl_matches_torch(case) -> None:
    """kl_divergence and its gradients in both distributions' parameters equal torch's (for Wishart p's, torch's
    exponential-family route detaches p's parameters: there central differences of torch's values stand in)."""
    name, build, pp, qp = case
    ep, eq = [em.tensor(v, requires_grad=True) for v in pp], [em.tensor(v, requires_grad=True) for v in qp]
    tp, tq = [torch.tensor(v, requires_grad=True) for v in pp], [torch.tensor(v, requires_grad=True) for v in qp]
    ke, kt = ed.kl_divergence(build(ed, *ep), build(ed, *eq)), td.kl_divergence(build(td, *tp), build(td, *tq))
    assert tuple(ke.shape) == tuple(kt.shape)
    np.testing.assert_allclose(ke.detach().numpy(), kt.detach().numpy(), rtol=1e-9, atol=1e-11, err_msg=name)
    ge = em.autograd.grad(ke.sum(), ep + eq)
    if name.startswith("wishart"):
        gt = [_central_difference(lambda *p: td.kl_divergence(build(td, *p), build(td, *tq)).sum(), tp, k)
              for k in range(len(tp))]
        gt += list(torch.autograd.grad(kt.sum(), tq))
        rtol = 1e-6
    else:
        gt, rtol = torch.autograd.grad(kt.sum(), tp + tq), 1e-8
    for k, (a, b) in enumerate(zip(ge, gt)):
        np.testing.assert_allclose(a.numpy(), _np(b), rtol=rtol, atol=rtol * 1e-2, err_msg=f"{name}: param {k}")


def _central_difference(fn, params, k, h=1e-5):
    """d fn / d params[k] by central differences, element by element."""
    base = [p.detach().clone() for p in params]
    out = np.zeros(tuple(base[k].shape))
    for idx in np.ndindex(out.shape):
        hi, lo = [p.clone() for p in base], [p.clone() for p in base]
        hi[k][idx] += h
        lo[k][idx] -= h
        out[idx] = (fn(*hi).item() - fn(*lo).item()) / (2 * h)  # torch's route differentiates inside: no no_grad
    return out


def test_kl_batched_wishart_and_missing_pairs() -> None:
    """A batch of Wishart KLs equals torch's one pair at a time; pairs torch has no formula for raise
    NotImplementedError in both."""
    df_p, df_q = np.array([3.5, 5.0, 9.0]), np.array([6.0, 2.5, 9.0])
    cov_p, cov_q = _spd((3,), 2), _spd((3,), 2)
    ke = ed.kl_divergence(ed.Wishart(em.tensor(df_p), covariance_matrix=em.tensor(cov_p)),
                          ed.Wishart(em.tensor(df_q), covariance_matrix=em.tensor(cov_q))).numpy()
    for i in range(3):
        kt = td.kl_divergence(td.Wishart(torch.tensor(df_p[i]), covariance_matrix=torch.tensor(cov_p[i])),
                              td.Wishart(torch.tensor(df_q[i]), covariance_matrix=torch.tensor(cov_q[i])))
        np.testing.assert_allclose(ke[i], kt.item(), rtol=1e-9)
    assert ke[2] == pytest.approx(ed.kl_divergence(
        ed.Wishart(9.0, covariance_matrix=em.tensor(cov_p[2])), ed.Wishart(9.0, covariance_matrix=em.tensor(cov_q[2])))
        .item(), rel=1e-12)
    pairs = [(lambda D, T: D.GeneralizedPareto(T(0.0), T(1.0), T(0.2)), lambda D, T: D.GeneralizedPareto(
        T(0.0), T(2.0), T(0.1))), (lambda D, T: D.LKJCholesky(3, T(1.0)), lambda D, T: D.LKJCholesky(3, T(2.0))),
        (lambda D, T: D.Wishart(T(3.0), covariance_matrix=T(np.eye(2))), lambda D, T: D.Normal(T(0.0), T(1.0))),
        (lambda D, T: D.InverseGamma(T(2.0), T(1.0)), lambda D, T: D.Gamma(T(2.0), T(1.0)))]
    for p, q in pairs:
        with pytest.raises(NotImplementedError):
            td.kl_divergence(p(td, torch.tensor), q(td, torch.tensor))
        with pytest.raises(NotImplementedError):
            ed.kl_divergence(p(ed, em.tensor), q(ed, em.tensor))


def _t(lib):
    return (lambda x: em.tensor(x, dtype=em.float64)) if lib is ed else (lambda x: torch.tensor(x, dtype=torch.float64))


# (build(lib, T), the exception torch raises (Ember's is the same class), text in Ember's one-line message)
BAD = [
    (lambda D, T: D.InverseGamma(T([1.0, -1.0]), T(1.0)), ValueError, "parameter concentration"),
    (lambda D, T: D.InverseGamma(T(1.0), T(0.0)), ValueError, "parameter rate"),
    (lambda D, T: D.GeneralizedPareto(T(0.0), T(-1.0), T(0.5)), ValueError, "parameter scale"),
    (lambda D, T: D.LogisticNormal(T([0.0, 1.0]), T([1.0, -1.0])), ValueError, "parameter scale"),
    (lambda D, T: D.LKJCholesky(1, T(1.0)), ValueError, "dim=1"),
    (lambda D, T: D.LKJCholesky(3, T(-1.0)), ValueError, "GreaterThan"),
    (lambda D, T: D.Wishart(T(1.5), covariance_matrix=T(np.eye(3))), ValueError, "expected to be greater than"),
    (lambda D, T: D.Wishart(T([4.0, 1.0]), covariance_matrix=T(np.eye(3))), ValueError, "ndim - 1 = 2"),
    (lambda D, T: D.Wishart(T(4.0), covariance_matrix=T([[2.0, 1.0], [1.0, 0.2]])), ValueError,
     "parameter covariance_matrix"),
    (lambda D, T: D.Wishart(T(4.0), scale_tril=T([[1.0, 0.0], [0.3, -1.0]])), ValueError, "LowerCholesky()"),
    (lambda D, T: D.Wishart(T(4.0)), AssertionError, "Exactly one of"),
    (lambda D, T: D.Wishart(T(4.0), covariance_matrix=T(np.eye(2)), scale_tril=T(np.eye(2))), AssertionError,
     "Exactly one of"),
    (lambda D, T: D.Wishart(T(4.0), covariance_matrix=T([1.0, 2.0])), ValueError, "at least two-dimensional"),
    (lambda D, T: D.Wishart(T([4.0, 5.0, 6.0]), covariance_matrix=T(np.eye(2)).expand(2, 2, 2)), RuntimeError,
     "do not broadcast"),
    (lambda D, T: D.InverseGamma(T(2.0), T(1.0)).log_prob(T([-1.0])), ValueError, "support"),
    (lambda D, T: D.GeneralizedPareto(T(0.0), T(1.0), T(-0.5)).log_prob(T([2.5])), ValueError, "support"),
    (lambda D, T: D.LogisticNormal(T([0.0, 0.0]), T([1.0, 1.0])).log_prob(T([0.5, 0.6, 0.1])), ValueError, "Simplex"),
    (lambda D, T: D.LKJCholesky(2, T(1.0)).log_prob(T([[1.0, 0.0], [0.5, 0.5]])), ValueError, "CorrCholesky"),
    (lambda D, T: D.Wishart(T(4.0), covariance_matrix=T(np.eye(2))).log_prob(T([[1.0, 2.0], [2.0, 1.0]])),
     ValueError, "PositiveDefinite"),
]


@pytest.mark.parametrize(("build", "exc", "text"), BAD, ids=[f"{i}-{c[2]}" for i, c in enumerate(BAD)])
def test_errors_are_torchs(build, exc, text) -> None:
    """torch raises exc, so does Ember, on one line that says what is wrong."""
    with pytest.raises(exc):
        build(td, _t(td))
    with pytest.raises(exc) as info:
        build(ed, _t(ed))
    msg = str(info.value)
    assert "\n" not in msg and text in msg, msg


def test_constraints_and_reprs_match_torch() -> None:
    """support and arg_constraints are torch's; validate_args=False skips the checks."""
    pairs = [(lambda D, T: D.InverseGamma(T(2.0), T(1.0))), (lambda D, T: D.LogisticNormal(T([0.0]), T([1.0]))),
             (lambda D, T: D.LKJCholesky(3, T(1.0))), (lambda D, T: D.Wishart(T(4.0), covariance_matrix=T(np.eye(3)))),
             (lambda D, T: D.GeneralizedPareto(T(0.0), T(1.0), T(0.5)))]
    for build in pairs:
        e, t = build(ed, _t(ed)), build(td, _t(td))
        assert {k: repr(v) for k, v in e.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
        if not ed.constraints.is_dependent(type(e).__dict__.get("support")):
            assert repr(e.support) == repr(t.support)
        assert repr(e).split("(")[0] == repr(t).split("(")[0]
    assert repr(ed.Wishart(em.tensor(4.0), covariance_matrix=em.eye(2))) == "Wishart(covariance_matrix: (2, 2), df: 4.0)"
    ed.InverseGamma(em.tensor(-1.0), em.tensor(1.0), validate_args=False)
    ed.GeneralizedPareto(0.0, -1.0, 0.5, validate_args=False)
