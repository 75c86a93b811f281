"""kl_divergence against torch.distributions.kl_divergence for every pair of families (values and gradients), the
pairs torch has no formula for (NotImplementedError in both), and register_kl's dispatch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

R = np.random.default_rng(7)


def _u(lo, hi, shape=(3,)):
    return R.uniform(lo, hi, shape)


def _loc_scale():
    return [[R.standard_normal(3), _u(0.5, 2)], [R.standard_normal(3), _u(0.5, 2)]]


def _factories():
    """name -> (build(lib, *params), params for p, params for q): q's parameters differ from p's."""
    tri = lambda a: a.tril(-1) + a.diagonal(dim1=-2, dim2=-1).exp().diag_embed()  # noqa: E731
    return {
        "Bernoulli": (lambda D, p: D.Bernoulli(probs=p), [_u(0.1, 0.9)], [_u(0.1, 0.9)]),
        "Beta": (lambda D, a, b: D.Beta(a, b), [_u(0.5, 3), _u(0.5, 3)], [_u(0.5, 3), _u(0.5, 3)]),
        "Binomial": (lambda D, p: D.Binomial(5, probs=p), [_u(0.1, 0.9)], [_u(0.1, 0.9)]),
        "Categorical": (lambda D, x: D.Categorical(logits=x), [R.standard_normal((3, 4))], [R.standard_normal((3, 4))]),
        "ContinuousBernoulli": (lambda D, p: D.ContinuousBernoulli(probs=p), [np.array([0.2, 0.4996, 0.8])],
                                [_u(0.1, 0.9)]),
        "Dirichlet": (lambda D, a: D.Dirichlet(a), [_u(0.5, 3, (3, 4))], [_u(0.5, 3, (3, 4))]),
        "Exponential": (lambda D, r: D.Exponential(r), [_u(0.5, 3)], [_u(0.5, 3)]),
        "Gamma": (lambda D, a, r: D.Gamma(a, r), [_u(0.5, 3), _u(0.5, 3)], [_u(0.5, 3), _u(0.5, 3)]),
        "Gumbel": (lambda D, m, s: D.Gumbel(m, s), *_loc_scale()),
        "Geometric": (lambda D, p: D.Geometric(probs=p), [_u(0.1, 0.9)], [_u(0.1, 0.9)]),
        "HalfNormal": (lambda D, s: D.HalfNormal(s), [_u(0.5, 2)], [_u(0.5, 2)]),
        "Laplace": (lambda D, m, s: D.Laplace(m, s), *_loc_scale()),
        "LowRankMultivariateNormal": (lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
                                      [R.standard_normal((2, 3)), R.standard_normal((2, 3, 2)), _u(0.5, 2, (2, 3))],
                                      [R.standard_normal((2, 3)), R.standard_normal((2, 3, 2)), _u(0.5, 2, (2, 3))]),
        "MultivariateNormal": (lambda D, m, a: D.MultivariateNormal(m, scale_tril=tri(a)),
                               [R.standard_normal((2, 3)), R.standard_normal((2, 3, 3)) * 0.5],
                               [R.standard_normal((2, 3)), R.standard_normal((2, 3, 3)) * 0.5]),
        "Normal": (lambda D, m, s: D.Normal(m, s), *_loc_scale()),
        "OneHotCategorical": (lambda D, x: D.OneHotCategorical(logits=x), [R.standard_normal((3, 4))],
                              [R.standard_normal((3, 4))]),
        "Pareto": (lambda D, s, a: D.Pareto(s, a), [np.array([0.5, 1.0, 2.0]), _u(2.5, 5)],
                   [np.array([0.4, 1.5, 1.0]), _u(2.5, 5)]),
        "Poisson": (lambda D, r: D.Poisson(r), [_u(0.5, 3)], [_u(0.5, 3)]),
        "LogNormal": (lambda D, m, s: D.LogNormal(m, s), [R.standard_normal(3), _u(0.5, 2)],
                      [R.standard_normal(3), _u(0.5, 2)]),
        "Uniform": (lambda D, a, b: D.Uniform(a, b), [np.array([0.1, 0.2, 0.05]), np.array([0.7, 0.9, 0.5])],
                    [np.array([0.0, 0.3, 0.01]), np.array([0.8, 0.95, 0.99])]),
        "Independent": (lambda D, m, s: D.Independent(D.Normal(m, s), 1),
                        [R.standard_normal((2, 3)), _u(0.5, 2, (2, 3))],
                        [R.standard_normal((2, 3)), _u(0.5, 2, (2, 3))]),
        "Cauchy": (lambda D, m, s: D.Cauchy(m, s), *_loc_scale()),
        "Weibull": (lambda D, s, k: D.Weibull(s, k), [_u(0.5, 2), _u(0.5, 2)], [_u(0.5, 2), _u(0.5, 2)]),
    }


_F = _factories()


def _pairs():
    """Every pair torch resolves to a formula (its registry, through subclasses), and every 8th other pair."""
    types = {n: type(_make(td, n, "p")[0]) for n in _F}
    with_formula, without = [], []
    for a, b in itertools.product(_F, _F):
        fun = td.kl._dispatch_kl(types[a], types[b])
        (without if fun is NotImplemented or fun is td.kl._kl_expfamily_expfamily else with_formula).append((a, b))
    return with_formula + without[::8]


def _make(lib, name, which):
    build, pp, qp = _F[name]
    params = pp if which == "p" else qp
    T = em if lib is ed else torch  # noqa: N806
    tensors = [T.tensor(a, requires_grad=True) for a in params]
    return build(lib, *tensors), tensors


_PAIRS = _pairs()


@pytest.mark.parametrize(("pn", "qn"), _PAIRS, ids=[f"{a}-{b}" for a, b in _PAIRS])
def test_kl_matches_torch(pn, qn) -> None:
    """Same value, same gradients in both distributions' parameters, or NotImplementedError in both."""
    tp, tpp = _make(td, pn, "p")
    tq, tqp = _make(td, qn, "q")
    ep, epp = _make(ed, pn, "p")
    eq, eqp = _make(ed, qn, "q")
    try:
        kt = td.kl_divergence(tp, tq)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="KL|kl|Binomial|transforms"):
            ed.kl_divergence(ep, eq)
        return
    ke = ed.kl_divergence(ep, eq)
    assert tuple(ke.shape) == tuple(kt.shape)
    np.testing.assert_allclose(ke.detach().numpy(), kt.detach().numpy(), rtol=1e-9, atol=1e-11, err_msg=f"{pn}||{qn}")
    if not kt.requires_grad:
        return
    finite = torch.isfinite(kt).detach()
    w = np.where(finite.numpy(), np.random.default_rng(3).standard_normal(tuple(kt.shape)), 0.0)
    gt = torch.autograd.grad((torch.where(finite, kt, 0.0) * torch.tensor(w)).sum(), tpp + tqp, allow_unused=True)
    ge = em.autograd.grad((em.where(em.tensor(finite.numpy()), ke, 0.0) * em.tensor(w)).sum(), epp + eqp,
                          allow_unused=True)
    for k, (a, b) in enumerate(zip(ge, gt)):
        a = 0.0 if a is None else a.numpy()
        b = 0.0 if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=f"{pn}||{qn}: gradient {k}")


def test_kl_edge_cases() -> None:
    """Infinite where q does not cover p; Binomial with a larger q count raises as torch does; mixed shapes."""
    u1, u2 = ed.Uniform(0.0, 2.0), ed.Uniform(em.tensor([0.5, -1.0]), em.tensor([3.0, 3.0]))
    np.testing.assert_allclose(ed.kl_divergence(u1, u2).numpy(), [np.inf, np.log(2.0)], rtol=1e-6)
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        ed.kl_divergence(ed.Binomial(3, probs=em.tensor(0.5)), ed.Binomial(5, probs=em.tensor(0.5)))
    kl = ed.kl_divergence(ed.Binomial(5, probs=em.tensor(0.5)), ed.Binomial(3, probs=em.tensor(0.5)))
    assert kl.item() == np.inf
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Categorical and q "
                                                  "type OneHotCategorical"):
        ed.kl_divergence(ed.Categorical(logits=em.zeros(3)), ed.OneHotCategorical(logits=em.zeros(3)))
    with pytest.raises(NotImplementedError):  # different transforms
        ed.kl_divergence(ed.Weibull(1.0, 2.0), ed.Weibull(1.0, 3.0))
    with pytest.raises(ValueError, match="different event shapes"):
        ed.kl_divergence(ed.MultivariateNormal(em.zeros(2), em.eye(2)), ed.MultivariateNormal(em.zeros(3), em.eye(3)))


def test_register_kl_dispatch() -> None:
    """A registered pair applies to subclasses; the most specific registration wins."""

    class MyNormal(ed.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), ed.Normal(1.0, 2.0)
    np.testing.assert_allclose(ed.kl_divergence(p, q).item(), ed.kl_divergence(ed.Normal(0.0, 1.0), q).item())

    @ed.register_kl(MyNormal, ed.Normal)
    def _mine(p, q):
        return em.tensor(42.0)

    try:
        assert ed.kl_divergence(p, q).item() == 42.0
        assert ed.kl_divergence(ed.Normal(0.0, 1.0), q).item() != 42.0
    finally:
        from ember.distributions import kl

        del kl._KL_REGISTRY[MyNormal, ed.Normal]
        kl._KL_MEMOIZE.clear()
    with pytest.raises(TypeError):
        ed.register_kl(int, ed.Normal)
