"""Samples: reproducible under ember.manual_seed; PyTorch's very numbers where Ember draws with PyTorch's kernels;
moments of 20000 draws within a few standard errors; rsample's gradients equal PyTorch's on the same draws, and
the implicit gradients of the gamma family equal ATen's formulas and are unbiased."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed
from tests.distributions.cases import CASES

# drawn by samplers PyTorch has as ATen kernels (gamma, Poisson, binomial): Ember's numbers are NumPy's algorithms on
# Ember's generator, so they are reproducible and have the right law, but are not PyTorch's
_OWN_SAMPLERS = {"poisson", "binomial_probs", "binomial_logits", "negative_binomial", "negative_binomial_logits",
                 "gamma", "chi2", "beta", "dirichlet", "student_t", "fisher_snedecor"}
_IDS = [c[0] for c in CASES]


def _both(build, params, grad=False):
    ep = [em.tensor(p, requires_grad=grad) for p in params]
    tp = [torch.tensor(p, requires_grad=grad) for p in params]
    return build(ed, *ep), build(td, *tp), ep, tp


@pytest.mark.parametrize(("name", "build", "params", "value", "q"), CASES, ids=_IDS)
def test_reproducible_and_torchs_draws(name, build, params, value, q) -> None:
    """The same seed gives the same samples; where Ember samples as PyTorch does, they are PyTorch's samples."""
    e, t, _, _ = _both(build, params)
    check_reproducible(e, t, name, torchs_draws=name not in _OWN_SAMPLERS)


def check_reproducible(e, t, name: str, torchs_draws: bool) -> None:
    """Ember's distribution `e` repeats its samples under the same seed; with `torchs_draws` they are torch's `t`'s."""
    em.manual_seed(11)
    first = e.sample((3,)).numpy()
    em.manual_seed(11)
    np.testing.assert_array_equal(e.sample((3,)).numpy(), first, err_msg=f"{name}: not reproducible")
    if torchs_draws:
        torch.manual_seed(11)
        np.testing.assert_allclose(first, t.sample((3,)).numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=f"{name}: not PyTorch's draws")


_RSAMPLE = [c for c in CASES if c[0] not in _OWN_SAMPLERS and c[0] not in {"von_mises"}]


@pytest.mark.parametrize(("name", "build", "params", "value", "q"), _RSAMPLE, ids=[c[0] for c in _RSAMPLE])
def test_rsample_gradients_match_torch(name, build, params, value, q) -> None:
    """rsample on the same draws as PyTorch's gives the same values and gradients in every parameter."""
    e, t, ep, tp = _both(build, params, grad=True)
    if not t.has_rsample:
        assert not e.has_rsample
        with pytest.raises(NotImplementedError):
            e.rsample()
        return
    em.manual_seed(5)
    torch.manual_seed(5)
    xe, xt = e.rsample((2,)), t.rsample((2,))
    np.testing.assert_allclose(xe.detach().numpy(), xt.detach().numpy(), rtol=1e-11, atol=1e-13)
    w = np.random.default_rng(2).standard_normal(tuple(xt.shape))
    ge = em.autograd.grad((xe * em.tensor(w)).sum(), ep, allow_unused=True)
    gt = torch.autograd.grad((xt * torch.tensor(w)).sum(), tp, allow_unused=True)
    for k, (a, b) in enumerate(zip(ge, gt)):
        a = np.zeros(tuple(ep[k].shape)) if a is None else a.numpy()
        b = np.zeros(tuple(tp[k].shape)) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"{name}: d rsample / d param {k}")


def _stat_cases():
    """Distributions with finite fourth moments (so standard errors of the variance are meaningful)."""
    p = np.array([0.2, 0.5, 0.85])
    k = np.array([0.7, 2.0, 6.0])
    return [
        ("normal", ed.Normal(em.tensor([0.0, 1.0, -2.0]), em.tensor([1.0, 0.5, 3.0]))),
        ("uniform", ed.Uniform(em.tensor([0.0, -1.0, 2.0]), em.tensor([1.0, 3.0, 2.5]))),
        ("exponential", ed.Exponential(em.tensor(k))),
        ("laplace", ed.Laplace(em.tensor([0.0, 1.0, -2.0]), em.tensor(k))),
        ("gumbel", ed.Gumbel(em.tensor([0.0, 1.0, -2.0]), em.tensor(k))),
        ("half_normal", ed.HalfNormal(em.tensor(k))),
        ("log_normal", ed.LogNormal(em.tensor([0.0, 0.5, -1.0]), em.tensor([0.3, 0.5, 0.2]))),
        ("poisson", ed.Poisson(em.tensor([0.3, 4.0, 40.0]))),
        ("geometric", ed.Geometric(probs=em.tensor(p))),
        ("binomial", ed.Binomial(em.tensor([1.0, 10.0, 30.0]), probs=em.tensor(p))),
        ("negative_binomial", ed.NegativeBinomial(em.tensor([0.5, 3.0, 10.0]), probs=em.tensor(p))),
        ("one_hot_categorical", ed.OneHotCategorical(probs=em.tensor([[0.2, 0.3, 0.5], [0.7, 0.1, 0.2]]))),
        ("multinomial", ed.Multinomial(5, probs=em.tensor([[0.2, 0.3, 0.5], [0.7, 0.1, 0.2]]))),
        ("mvn", ed.MultivariateNormal(em.tensor([1.0, -1.0]), covariance_matrix=em.tensor([[2.0, 0.6], [0.6, 1.0]]))),
        ("lowrank_mvn", ed.LowRankMultivariateNormal(em.tensor([1.0, -1.0, 0.0]), em.tensor([[1.0], [0.5], [-1.0]]),
                                                     em.tensor([0.5, 1.0, 0.2]))),
        ("gamma", ed.Gamma(em.tensor([0.1, 1.5, 20.0]), em.tensor([1.0, 2.0, 0.5]))),
        ("chi2", ed.Chi2(em.tensor(k))),
        ("beta", ed.Beta(em.tensor([0.3, 2.0, 9.0]), em.tensor([0.5, 2.0, 1.5]))),
        ("dirichlet", ed.Dirichlet(em.tensor([[0.3, 1.0, 4.0], [10.0, 20.0, 5.0]]))),
        ("student_t", ed.StudentT(em.tensor([9.0, 12.0, 30.0]), em.tensor([0.0, 1.0, -1.0]), em.tensor(k))),
        ("fisher_snedecor", ed.FisherSnedecor(em.tensor([3.0, 10.0, 40.0]), em.tensor([12.0, 20.0, 40.0]))),
        ("weibull", ed.Weibull(em.tensor(k), em.tensor([0.8, 1.5, 5.0]))),
        ("pareto", ed.Pareto(em.tensor(k), em.tensor([9.0, 10.0, 12.0]))),
        ("kumaraswamy", ed.Kumaraswamy(em.tensor([0.5, 2.0, 5.0]), em.tensor([0.7, 3.0, 1.5]))),
        ("continuous_bernoulli", ed.ContinuousBernoulli(probs=em.tensor([0.1, 0.5, 0.8]))),
        ("von_mises", ed.VonMises(em.tensor([0.0, 1.0, -2.0]), em.tensor([0.5, 2.0, 20.0]))),
        ("mixture", ed.MixtureSameFamily(ed.Categorical(probs=em.tensor([0.3, 0.7])),
                                         ed.Normal(em.tensor([-1.0, 2.0]), em.tensor([0.5, 1.0])))),
    ]


@pytest.mark.parametrize(("name", "dist"), _stat_cases(), ids=[c[0] for c in _stat_cases()])
def test_sample_moments(name, dist) -> None:
    """The mean and variance of 20000 draws are within 5 standard errors of the distribution's mean and variance."""
    em.manual_seed(2024)
    n = 20000
    x = dist.sample((n,)).to(em.float64).numpy()
    assert x.shape == (n,) + dist.batch_shape + dist.event_shape
    assert np.all(dist.support.check(em.tensor(x)).numpy()), f"{name}: samples outside the support"
    mean, var = dist.mean.to(em.float64).numpy(), dist.variance.to(em.float64).numpy()
    if name == "von_mises":  # a circular distribution: its mean is loc, its variance 1 - E[cos(x - loc)]
        c = np.cos(x - dist.loc.numpy())
        np.testing.assert_array_less(np.abs(c.mean(0) - (1 - var)), 5 * c.std(0) / np.sqrt(n) + 1e-12)
        return
    se_mean = x.std(0) / np.sqrt(n)
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * se_mean + 1e-12, err_msg=f"{name}: mean")
    dev2 = (x - x.mean(0)) ** 2
    se_var = dev2.std(0) / np.sqrt(n)
    np.testing.assert_array_less(np.abs(x.var(0) - var), 5 * se_var + 1e-12, err_msg=f"{name}: variance")


def test_gamma_rsample_gradient_is_atens() -> None:
    """Gamma's rsample gradient in the concentration is ATen's standard_gamma_grad at the drawn values (divided by
    the rate), and in the rate it is -x / rate; over many draws it averages to d mean / d concentration = 1/rate."""
    alpha = em.tensor([0.05, 0.5, 1.0, 3.0, 9.0, 40.0], requires_grad=True)
    rate = em.tensor([1.0, 2.0, 0.5, 1.0, 3.0, 1.0], requires_grad=True)
    em.manual_seed(0)
    x = ed.Gamma(alpha, rate).rsample((4000,))
    ga, gr = em.autograd.grad(x.sum(), [alpha, rate])
    xs = x.detach().numpy() * rate.detach().numpy()  # the standard-gamma draws
    expect = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()).expand(4000, 6), torch.tensor(xs))
    np.testing.assert_allclose(ga.numpy(), (expect.numpy() / rate.detach().numpy()).sum(0), rtol=1e-10)
    np.testing.assert_allclose(gr.numpy(), -(x.detach().numpy() / rate.detach().numpy()).sum(0), rtol=1e-10)
    per_draw = expect.numpy() / rate.detach().numpy()
    err = np.abs(per_draw.mean(0) - 1 / rate.detach().numpy())
    np.testing.assert_array_less(err, 5 * per_draw.std(0) / np.sqrt(4000))


def test_dirichlet_and_beta_rsample_gradients_are_atens() -> None:
    """Dirichlet's rsample gradient is PyTorch's (_dirichlet_grad through the simplex) at the drawn values; Beta's
    averages to d mean / d concentration."""
    conc = em.tensor([[0.4, 1.0, 3.0], [8.0, 9.0, 0.2]], dtype=em.float64, requires_grad=True)
    em.manual_seed(1)
    x = ed.Dirichlet(conc).rsample((500,))
    w = np.random.default_rng(0).standard_normal(tuple(x.shape))
    (g,) = em.autograd.grad((x * em.tensor(w)).sum(), [conc])
    xt, wt = torch.tensor(x.detach().numpy()), torch.tensor(w)
    ct = torch.tensor(conc.detach().numpy()).expand(500, 2, 3)
    grad = torch._dirichlet_grad(xt, ct, ct.sum(-1, True).expand_as(ct))
    expect = (grad * (wt - (xt * wt).sum(-1, True))).sum(0)
    np.testing.assert_allclose(g.numpy(), expect.numpy(), rtol=1e-9, atol=1e-12)
    a, b = em.tensor([0.5, 2.0, 6.0], requires_grad=True), em.tensor([1.5, 2.0, 0.8], requires_grad=True)
    em.manual_seed(2)
    n = 20000
    xb = ed.Beta(a, b).rsample((n,))
    ga, gb = em.autograd.grad(xb.sum(), [a, b])
    an, bn = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_allclose(ga.numpy() / n, bn / (an + bn) ** 2, rtol=0.05)
    np.testing.assert_allclose(gb.numpy() / n, -an / (an + bn) ** 2, rtol=0.05)


def test_gamma_family_rsample_flows_to_parameters() -> None:
    """Chi2, StudentT and FisherSnedecor (gamma draws inside) are reparameterised: gradients reach every parameter."""
    df, loc, scale = (em.tensor([3.0, 7.0], requires_grad=True) for _ in range(3))
    for dist, params in [(ed.Chi2(df), [df]), (ed.StudentT(df, loc, scale), [df, loc, scale]),
                         (ed.FisherSnedecor(df, scale), [df, scale])]:
        em.manual_seed(0)
        grads = em.autograd.grad(dist.rsample((50,)).sum(), params)
        assert all(g is not None and np.all(np.isfinite(g.numpy())) and np.any(g.numpy() != 0) for g in grads)


def test_sample_has_no_gradient_and_discrete_samples_are_exact() -> None:
    """sample() is detached; discrete samples are integers inside the support."""
    p = em.tensor([0.3, 0.6], requires_grad=True)
    for d in [ed.Poisson(p * 10), ed.Binomial(12, probs=p), ed.Geometric(probs=p), ed.NegativeBinomial(4.0, probs=p)]:
        s = d.sample((200,))
        assert not s.requires_grad and s.dtype == em.float32
        assert np.all(s.numpy() % 1 == 0) and np.all(d.support.check(s).numpy())
