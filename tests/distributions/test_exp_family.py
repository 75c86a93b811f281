"""torch.distributions.ExponentialFamily: which distributions are members, their natural parameters and log
normalizers, the entropy and same-family KL divergence as Bregman divergences, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
B = (2, 3)


def _pos(shape, lo=0.5, hi=2.5):
    return RNG.uniform(lo, hi, shape)


def _spd(batch=(2,), p=3):
    a = RNG.standard_normal(batch + (p, p)) * 0.5
    return a @ np.swapaxes(a, -1, -2) + np.eye(p)


# (name, build(distributions, *params), params for p, params for q, has a mean carrier measure)
FAMILIES = [
    ("bernoulli", lambda D, pr: D.Bernoulli(probs=pr), [RNG.uniform(0.1, 0.9, B)], [RNG.uniform(0.1, 0.9, B)], True),
    ("beta", lambda D, a, b: D.Beta(a, b), [_pos(B), _pos(B)], [_pos(B), _pos(B)], False),
    ("continuous_bernoulli", lambda D, pr: D.ContinuousBernoulli(probs=pr),
     [np.array([0.1, 0.4995, 0.5, 0.7, 0.9, 0.3])], [np.array([0.2, 0.5, 0.6, 0.3, 0.5004, 0.8])], True),
    ("dirichlet", lambda D, c: D.Dirichlet(c), [_pos(B + (4,))], [_pos(B + (4,))], False),
    ("exponential", lambda D, r: D.Exponential(r), [_pos(B)], [_pos(B)], True),
    ("gamma", lambda D, c, r: D.Gamma(c, r), [_pos(B), _pos(B)], [_pos(B), _pos(B)], True),
    ("normal", lambda D, m, s: D.Normal(m, s), [RNG.standard_normal(B), _pos(B)], [RNG.standard_normal(B), _pos(B)],
     True),
    ("poisson", lambda D, r: D.Poisson(r), [_pos(B)], [_pos(B)], False),
    ("wishart", lambda D, df, cov: D.Wishart(df, covariance_matrix=cov), [np.array([4.0, 5.5]), _spd()],
     [np.array([3.5, 6.0]), _spd()], True),
]
IDS = [f[0] for f in FAMILIES]


def _pair(build, params, requires_grad=False):
    mine = [em.tensor(p, requires_grad=requires_grad) for p in params]
    theirs = [torch.tensor(p, requires_grad=requires_grad) for p in params]
    return build(em.distributions, *mine), build(torch.distributions, *theirs), mine, theirs


def _close(mine, theirs, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(np.asarray(mine.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


def test_the_members_are_pytorchs():
    """Every distribution PyTorch derives from ExponentialFamily, and only those, is a member here."""
    names = [n for n in dir(torch.distributions) if isinstance(getattr(torch.distributions, n), type)
             and issubclass(getattr(torch.distributions, n), torch.distributions.Distribution)]
    theirs = {n for n in names if issubclass(getattr(torch.distributions, n), torch.distributions.ExponentialFamily)}
    mine = {n for n in names if hasattr(em.distributions, n)
            and issubclass(getattr(em.distributions, n), em.distributions.ExponentialFamily)}
    assert mine == theirs and "Normal" in mine and "Chi2" in mine


@pytest.mark.parametrize("name, build, params, _, __", FAMILIES, ids=IDS)
def test_natural_parameters_and_log_normalizer(name, build, params, _, __):
    d, t, _, _ = _pair(build, params)
    mine, theirs = d._natural_params, t._natural_params
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        _close(a, b)
    _close(d._log_normalizer(*mine), t._log_normalizer(*theirs))


@pytest.mark.parametrize("name, build, params, _, carrier", FAMILIES, ids=IDS)
def test_the_bregman_entropy_is_the_closed_form_and_pytorchs(name, build, params, _, carrier):
    d, t, _, _ = _pair(build, params)
    base = em.distributions.ExponentialFamily
    if not carrier:  # PyTorch gives these no mean carrier measure either
        with pytest.raises(NotImplementedError, match="_mean_carrier_measure"):
            base.entropy(d)
        return
    got, want = base.entropy(d), torch.distributions.ExponentialFamily.entropy(t)
    _close(got, want, rtol=1e-8, atol=1e-8)
    _close(got, d.entropy(), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name, build, params, other, _", FAMILIES, ids=IDS)
def test_the_bregman_kl_divergence_matches_pytorchs_and_the_closed_form(name, build, params, other, _):
    from torch.distributions.kl import _kl_expfamily_expfamily as torch_bregman

    from ember.distributions.kl import _kl_expfamily_expfamily as bregman

    if name == "wishart":  # PyTorch's sums its degrees-of-freedom term over the batch: compare one at a time
        params, other = [x[:1] for x in params], [x[:1] for x in other]
    p, tp, _, _ = _pair(build, params)
    q, tq, mine, theirs = _pair(build, other, requires_grad=True)
    got, want = bregman(p, q), torch_bregman(tp, tq)
    _close(got, want, rtol=1e-8, atol=1e-8)
    _close(got, em.distributions.kl_divergence(p, q), rtol=1e-7, atol=1e-8)
    got.sum().backward()  # to q's parameters (p's natural parameters are detached, as in PyTorch)
    want.sum().backward()
    for a, b in zip(mine, theirs):
        _close(a.grad, b.grad, rtol=1e-7, atol=1e-8)


def test_a_batch_of_wisharts_gets_each_its_own_kl_divergence():
    """PyTorch's Bregman KL between two batches of Wisharts sums the degrees-of-freedom term over the batch (its
    inner product sums every parameter over the event's two dims); here each entry's divergence is its own: the
    closed form (test_more_distributions.py checks it against PyTorch one pair at a time) and the divergences of
    the entries one at a time."""
    from torch.distributions.kl import _kl_expfamily_expfamily as torch_bregman

    from ember.distributions.kl import _kl_expfamily_expfamily as bregman

    _, build, params, other, _ = FAMILIES[IDS.index("wishart")]
    p, tp, _, _ = _pair(build, params)
    q, tq, _, _ = _pair(build, other)
    got = bregman(p, q)
    _close(got, em.distributions.kl_divergence(p, q), rtol=1e-8, atol=1e-8)
    one_at_a_time = [torch_bregman(*(_pair(build, [x[i:i + 1] for x in ps])[1] for ps in (params, other)))
                     for i in range(2)]
    _close(got, torch.cat(one_at_a_time), rtol=1e-8, atol=1e-8)
    assert not np.allclose(got.detach().numpy(), torch_bregman(tp, tq).detach().numpy())


def test_different_families_have_no_bregman_kl_divergence():
    from ember.distributions.kl import _kl_expfamily_expfamily as bregman

    D = em.distributions
    with pytest.raises(NotImplementedError, match=r"kl_divergence\(Normal, Exponential\): .*different exponential"):
        bregman(D.Normal(0.0, 1.0), D.Exponential(1.0))


class _Unit(em.distributions.ExponentialFamily):
    """A family of one's own with no KL formula registered: N(mu, 1), natural parameter mu, F = mu^2 / 2."""

    def __init__(self, mu):
        self.mu = em.as_tensor(mu)
        super().__init__(tuple(self.mu.shape), validate_args=False)

    _mean_carrier_measure = 0

    @property
    def _natural_params(self):
        return (self.mu,)

    def _log_normalizer(self, x):
        return x.pow(2) / 2


def test_a_users_family_gets_its_kl_divergence_and_entropy_from_the_base_class():
    """KL(N(a, 1) || N(b, 1)) = (a - b)^2 / 2 through the registered (ExponentialFamily, ExponentialFamily) rule; the
    base class's entropy gives F - mu F'(mu) = -mu^2 / 2 for this carrier-free form, also with gradients off."""
    a, b = em.tensor([0.0, 1.5, -2.0]), em.tensor([1.0, 1.0, 1.0])
    np.testing.assert_allclose(em.distributions.kl_divergence(_Unit(a), _Unit(b)).detach().numpy(),
                               [0.5, 0.125, 4.5])
    with em.no_grad():
        np.testing.assert_allclose(_Unit(a).entropy().detach().numpy(), [0.0, -1.125, -2.0])


def test_a_subclass_missing_its_parameters_says_which():
    class Bare(em.distributions.ExponentialFamily):
        def __init__(self):
            super().__init__((), validate_args=False)

    with pytest.raises(NotImplementedError, match="Bare: _mean_carrier_measure is not implemented"):
        Bare().entropy()
    with pytest.raises(NotImplementedError, match="Bare: _log_normalizer is not implemented"):
        Bare()._log_normalizer(em.tensor(0.0))
