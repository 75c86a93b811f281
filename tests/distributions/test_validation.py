"""Argument checking as torch.distributions does it (ValueError for bad parameters and for values outside the
support, one line naming the distribution, the parameter and the constraint), and the discrete distributions'
enumerate_support."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

BAD = np.array([[2.0, 1.0], [1.0, 0.2]])  # symmetric, not positive definite

# (build(lib, T), the parameter named in the message, the constraint named in it)
BAD_PARAMS = [
    (lambda D, T: D.Normal(T([0.0, 1.0]), T([1.0, -1.0])), "Normal", "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda D, T: D.Uniform(T([0.0, 2.0]), T([1.0, 1.0])), "Uniform", "low", "LessThan"),
    (lambda D, T: D.Exponential(T([-1.0])), "Exponential", "rate", "GreaterThan(lower_bound=0.0)"),
    (lambda D, T: D.Laplace(T(0.0), T(-2.0)), "Laplace", "scale", "GreaterThan"),
    (lambda D, T: D.Cauchy(T(0.0), T(0.0)), "Cauchy", "scale", "GreaterThan"),
    (lambda D, T: D.Gumbel(T(0.0), T(-1.0)), "Gumbel", "scale", "GreaterThan"),
    (lambda D, T: D.HalfNormal(T([1.0, -1.0])), "HalfNormal", "scale", "GreaterThan"),
    (lambda D, T: D.HalfCauchy(T(-1.0)), "HalfCauchy", "scale", "GreaterThan"),
    (lambda D, T: D.LogNormal(T(0.0), T(-1.0)), "LogNormal", "scale", "GreaterThan"),
    (lambda D, T: D.Poisson(T([-0.5])), "Poisson", "rate", "GreaterThanEq(lower_bound=0.0)"),
    (lambda D, T: D.Geometric(probs=T([1.5])), "Geometric", "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda D, T: D.Binomial(T([2.5]), probs=T([0.5])), "Binomial", "total_count", "IntegerGreaterThan(lower_bound=0)"),
    (lambda D, T: D.Binomial(3, probs=T([1.5])), "Binomial", "probs", "Interval"),
    (lambda D, T: D.NegativeBinomial(T(2.0), probs=T(1.0)), "NegativeBinomial", "probs", "HalfOpenInterval"),
    (lambda D, T: D.NegativeBinomial(T(-2.0), probs=T(0.5)), "NegativeBinomial", "total_count", "GreaterThanEq"),
    (lambda D, T: D.Categorical(probs=T([0.5, -0.1, 0.6])), "Categorical", "probs", "Simplex()"),
    (lambda D, T: D.OneHotCategorical(probs=T([0.5, -0.1, 0.6])), "OneHotCategorical", "probs", "Simplex()"),
    (lambda D, T: D.Multinomial(3, probs=T([0.5, -0.1, 0.6])), "Multinomial", "probs", "Simplex()"),
    (lambda D, T: D.Bernoulli(probs=T([1.2])), "Bernoulli", "probs", "Interval"),
    (lambda D, T: D.MultivariateNormal(T([0.0, 0.0]), covariance_matrix=T(BAD)), "MultivariateNormal",
     "covariance_matrix", "PositiveDefinite()"),
    (lambda D, T: D.MultivariateNormal(T([0.0, 0.0]), precision_matrix=T(BAD)), "MultivariateNormal",
     "precision_matrix", "PositiveDefinite()"),
    (lambda D, T: D.MultivariateNormal(T([0.0, 0.0]), covariance_matrix=T([[1.0, 0.5], [0.0, 1.0]])),
     "MultivariateNormal", "covariance_matrix", "PositiveDefinite()"),
    (lambda D, T: D.MultivariateNormal(T([0.0, 0.0]), scale_tril=T([[1.0, 0.0], [0.3, -1.0]])), "MultivariateNormal",
     "scale_tril", "LowerCholesky()"),
    (lambda D, T: D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0], [0.0]]), T([1.0, -1.0])),
     "LowRankMultivariateNormal", "cov_diag", "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
    (lambda D, T: D.Gamma(T([1.0, -1.0]), T(1.0)), "Gamma", "concentration", "GreaterThan"),
    (lambda D, T: D.Gamma(T(1.0), T(0.0)), "Gamma", "rate", "GreaterThan"),
    (lambda D, T: D.Chi2(T([-3.0])), "Chi2", "df", "GreaterThan"),
    (lambda D, T: D.Beta(T(-1.0), T(1.0)), "Beta", "concentration1", "GreaterThan"),
    (lambda D, T: D.Dirichlet(T([1.0, 0.0])), "Dirichlet", "concentration",
     "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
    (lambda D, T: D.StudentT(T(-1.0)), "StudentT", "df", "GreaterThan"),
    (lambda D, T: D.FisherSnedecor(T(1.0), T(-1.0)), "FisherSnedecor", "df2", "GreaterThan"),
    (lambda D, T: D.VonMises(T(0.0), T(-1.0)), "VonMises", "concentration", "GreaterThan"),
    (lambda D, T: D.Weibull(T(1.0), T(-1.0)), "Weibull", "concentration", "GreaterThan"),
    (lambda D, T: D.Pareto(T(1.0), T(-1.0)), "Pareto", "alpha", "GreaterThan"),
    (lambda D, T: D.Kumaraswamy(T(1.0), T(-1.0)), "Kumaraswamy", "concentration0", "GreaterThan"),
    (lambda D, T: D.ContinuousBernoulli(probs=T([1.5]), validate_args=True), "ContinuousBernoulli", "probs",
     "Interval"),
    (lambda D, T: D.RelaxedBernoulli(T(0.5), probs=T([1.5])), "RelaxedBernoulli", "probs", "Interval"),
    (lambda D, T: D.RelaxedOneHotCategorical(T(0.5), probs=T([0.5, -0.1, 0.6])), "RelaxedOneHotCategorical", "probs",
     "Simplex()"),
]


def _t(lib):
    return (lambda x: em.tensor(x, dtype=em.float64)) if lib is ed else (lambda x: torch.tensor(x, dtype=torch.float64))


@pytest.mark.parametrize(("build", "dist", "param", "constraint"), BAD_PARAMS,
                         ids=[f"{c[1]}-{c[2]}" for c in BAD_PARAMS])
def test_bad_parameters(build, dist, param, constraint) -> None:
    """torch raises ValueError, so does Ember, with one line naming the distribution, parameter and constraint; with
    validate_args=False nothing is checked."""
    with pytest.raises(ValueError):
        build(td, _t(td))
    with pytest.raises(ValueError) as info:
        build(ed, _t(ed))
    msg = str(info.value)
    assert "\n" not in msg
    assert f"parameter {param} " in msg and f"distribution {dist}(" in msg and constraint in msg, msg


def test_validate_args_off() -> None:
    """validate_args=False and set_default_validate_args(False) skip the checks."""
    ed.Normal(0.0, -1.0, validate_args=False)
    ed.set_default_validate_args(False)
    try:
        ed.Gamma(-1.0, 1.0)
        ed.Normal(0.0, 1.0).log_prob(em.tensor([1.0, 2.0, 3.0]).reshape(3, 1))
        ed.Exponential(1.0).log_prob(em.tensor(-1.0))
    finally:
        ed.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ed.Gamma(-1.0, 1.0)
    with pytest.raises(ValueError):
        ed.set_default_validate_args("yes")


BAD_VALUES = [
    (lambda D, T: D.Exponential(T([1.0, 2.0])), [1.0, -1.0], "GreaterThanEq(lower_bound=0.0)"),
    (lambda D, T: D.Uniform(T(0.0), T(1.0)), [0.5, 1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda D, T: D.Poisson(T([1.0, 2.0])), [1.0, 1.5], "IntegerGreaterThan(lower_bound=0)"),
    (lambda D, T: D.Bernoulli(probs=T([0.3, 0.4])), [1.0, 0.5], "Boolean()"),
    (lambda D, T: D.Categorical(logits=T([0.0, 1.0, 2.0])), [3.0], "IntegerInterval(lower_bound=0, upper_bound=2)"),
    (lambda D, T: D.Binomial(3, probs=T([0.5])), [4.0], "IntegerInterval"),
    (lambda D, T: D.Beta(T(1.0), T(2.0)), [1.5], "Interval"),
    (lambda D, T: D.Gamma(T(1.0), T(2.0)), [-0.5], "GreaterThanEq"),
    (lambda D, T: D.Dirichlet(T([1.0, 2.0])), [0.5, 0.6], "Simplex()"),
    (lambda D, T: D.OneHotCategorical(probs=T([0.5, 0.5])), [1.0, 1.0], "OneHot()"),
    (lambda D, T: D.LogNormal(T(0.0), T(1.0)), [-1.0], "GreaterThan(lower_bound=0.0)"),
    (lambda D, T: D.HalfNormal(T(1.0)), [-1.0], "GreaterThanEq"),
    (lambda D, T: D.Pareto(T(2.0), T(1.0)), [1.0], "GreaterThanEq"),
    (lambda D, T: D.Multinomial(2, probs=T([0.5, 0.5])), [2.0, 1.0], "Multinomial"),
    (lambda D, T: D.Independent(D.Exponential(T([1.0, 2.0])), 1), [1.0, -2.0], "Independent-GreaterThanEq"),
]


@pytest.mark.parametrize(("build", "value", "constraint"), BAD_VALUES, ids=[c[2] for c in BAD_VALUES])
def test_values_outside_support(build, value, constraint) -> None:
    """log_prob of a value outside the support: ValueError in both, Ember's naming the support on one line."""
    with pytest.raises(ValueError):
        build(td, _t(td)).log_prob(torch.tensor(value, dtype=torch.float64))
    with pytest.raises(ValueError) as info:
        build(ed, _t(ed)).log_prob(em.tensor(value, dtype=em.float64))
    msg = str(info.value)
    assert "\n" not in msg and "to be within the support" in msg and constraint.split("-")[-1] in msg, msg


def test_shape_errors() -> None:
    """Values of the wrong event or batch shape, and parameters that cannot go together."""
    mvn = ed.MultivariateNormal(em.zeros(2, 3), em.eye(3))
    with pytest.raises(ValueError, match="right-most size of value must match event_shape"):
        mvn.log_prob(em.zeros(2, 4))
    with pytest.raises(ValueError, match="not broadcastable with batch_shape"):
        mvn.log_prob(em.zeros(3, 3))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        ed.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError):
        ed.MultivariateNormal(em.zeros(3), em.eye(2))
    with pytest.raises(RuntimeError, match="do not broadcast"):  # PyTorch's class (and a ValueError too)
        ed.MultivariateNormal(em.zeros(4, 3), em.eye(3).expand(2, 3, 3))
    for build in [lambda D, T: D.Normal(T([0.0, 1.0]), T([1.0, 1.0, 1.0])),
                  lambda D, T: D.Gamma(T([1.0, 2.0]), T([[1.0], [2.0], [3.0]]).expand(3, 3)),
                  lambda D, T: D.StudentT(T([3.0, 4.0]), T([0.0, 0.0, 0.0]))]:
        with pytest.raises(RuntimeError):
            build(td, torch.tensor)
        with pytest.raises(RuntimeError, match="parameters of shapes .* cannot be broadcast together") as info:
            build(ed, em.tensor)
        assert isinstance(info.value, ValueError) and str(info.value).split("(")[0] in ("Normal", "Gamma", "StudentT")
    with pytest.raises(ValueError, match="Exactly one of"):
        ed.MultivariateNormal(em.zeros(2), em.eye(2), scale_tril=em.eye(2))
    with pytest.raises(ValueError, match="cov_diag must be a batch of vectors"):
        ed.LowRankMultivariateNormal(em.zeros(2), em.zeros(2, 1), em.ones(3))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        ed.Binomial(3)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        ed.Independent(ed.Normal(em.zeros(2), 1.0), 2)
    with pytest.raises(ValueError, match="does not equal"):
        ed.MixtureSameFamily(ed.Categorical(logits=em.zeros(3)), ed.Normal(em.zeros(2), 1.0))
    with pytest.raises(ValueError, match="Input arguments must all be instances of Number"):
        ed.Normal([0.0], 1.0)
    with pytest.raises(RuntimeError):  # not checked, so the Cholesky factorisation fails (PyTorch's LinAlgError)
        ed.MultivariateNormal(em.zeros(2), em.tensor(BAD), validate_args=False)


ENUMERABLE = [
    lambda D, T: D.Bernoulli(probs=T([0.2, 0.7])),
    lambda D, T: D.Categorical(logits=T([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])),
    lambda D, T: D.Binomial(4, probs=T([0.2, 0.7])),
    lambda D, T: D.OneHotCategorical(probs=T([[0.2, 0.8], [0.5, 0.5], [0.1, 0.9]])),
    lambda D, T: D.Independent(D.Bernoulli(probs=T([0.2, 0.7])), 0),
]


@pytest.mark.parametrize("build", ENUMERABLE)
@pytest.mark.parametrize("expand", [True, False])
def test_enumerate_support(build, expand) -> None:
    """The same values, shape and dtype as torch's; log_prob over them sums to one."""
    e, t = build(ed, _t(ed)), build(td, _t(td))
    assert e.has_enumerate_support and t.has_enumerate_support
    se, st = e.enumerate_support(expand), t.enumerate_support(expand)
    np.testing.assert_array_equal(se.numpy(), st.numpy())
    assert str(se.dtype).split(".")[-1] == str(st.dtype).split(".")[-1]
    if expand:
        np.testing.assert_allclose(e.log_prob(se).exp().sum(0).numpy(), 1.0, rtol=1e-12)
    with pytest.raises(NotImplementedError):
        ed.Independent(ed.Bernoulli(probs=em.tensor([0.2, 0.7])), 1).enumerate_support()


def test_repr_and_constraints_match_torch() -> None:
    """Distributions' and constraints' reprs are torch's; support and arg_constraints are the same constraints."""
    assert repr(ed.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(ed.Gamma(em.ones(3), 1.0)) == "Gamma(concentration: (3,), rate: (3,))"
    pairs = [(ed.Normal(0.0, 1.0), td.Normal(0.0, 1.0)), (ed.Beta(1.0, 2.0), td.Beta(1.0, 2.0)),
             (ed.Dirichlet(em.ones(3)), td.Dirichlet(torch.ones(3))),
             (ed.MultivariateNormal(em.zeros(2), em.eye(2)), td.MultivariateNormal(torch.zeros(2), torch.eye(2))),
             (ed.Binomial(3, probs=em.tensor(0.5)), td.Binomial(3, probs=torch.tensor(0.5))),
             (ed.LogNormal(0.0, 1.0), td.LogNormal(0.0, 1.0)), (ed.Poisson(1.0), td.Poisson(1.0)),
             (ed.Independent(ed.Normal(em.zeros(2), 1.0), 1), td.Independent(td.Normal(torch.zeros(2), 1.0), 1))]
    for e, t in pairs:
        assert repr(e.support).replace("ember.", "torch.") == repr(t.support), (e, t)
        assert {k: repr(v) for k, v in e.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
    assert repr(ed.Independent(ed.Normal(em.zeros(2), 1.0), 1)) == repr(
        td.Independent(td.Normal(torch.zeros(2), 1.0), 1)).replace("torch.Size([2])", "(2,)")
