"""The table of distributions the tests compare with torch.distributions: how to build each in either library
from NumPy parameters, a value inside its support (shaped to broadcast against the batch) and probabilities for
icdf."""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(0)
B = (2, 3)


def _pos(shape, lo=0.5, hi=2.5):
    return RNG.uniform(lo, hi, shape)


def _unit(shape, lo=0.1, hi=0.9):
    return RNG.uniform(lo, hi, shape)


LOC, SCALE = RNG.standard_normal(B), _pos(B)
LOW = RNG.standard_normal(B)
HIGH = LOW + _pos(B)
PROBS = _unit(B)
LOGITS = RNG.standard_normal(B)
CAT_LOGITS = RNG.standard_normal(B + (4,))
CONC = _pos(B)
RATE = _pos(B)
Q = _unit((5,) + B)  # probabilities for icdf


def _cov(a):
    """A positive-definite covariance built from a free matrix (so gradients need no symmetrisation rule)."""
    return a @ a.mT + (a[..., 0, :] * 0 + 0.5).diag_embed()


def _tril(a):
    """A lower Cholesky factor built from a free matrix: its strict lower part and exp of its diagonal."""
    return a.tril(-1) + a.diagonal(dim1=-2, dim2=-1).exp().diag_embed()


A3 = RNG.standard_normal((2, 3, 3)) * 0.5
A3B = RNG.standard_normal((2, 3, 3)) * 0.5

# (name, build(lib, *params), params, value, icdf probabilities or None)
CASES = [
    ("normal", lambda D, m, s: D.Normal(m, s), [LOC, SCALE], RNG.standard_normal((4,) + B), Q),
    ("normal_bcast", lambda D, m, s: D.Normal(m, s), [LOC, SCALE[:1]], RNG.standard_normal(B[-1:]), Q),
    ("uniform", lambda D, a, b: D.Uniform(a, b), [LOW, HIGH], LOW + _unit((4,) + B) * (HIGH - LOW), Q),
    ("exponential", lambda D, r: D.Exponential(r), [RATE], _pos((4,) + B), Q),
    ("laplace", lambda D, m, s: D.Laplace(m, s), [LOC, SCALE], RNG.standard_normal((4,) + B), Q),
    ("cauchy", lambda D, m, s: D.Cauchy(m, s), [LOC, SCALE], RNG.standard_normal(B), Q),
    ("gumbel", lambda D, m, s: D.Gumbel(m, s), [LOC, SCALE], RNG.standard_normal((4,) + B), Q),
    ("half_normal", lambda D, s: D.HalfNormal(s), [SCALE], _pos((4,) + B), Q),
    ("half_cauchy", lambda D, s: D.HalfCauchy(s), [SCALE], _pos(B[-1:]), Q),
    ("log_normal", lambda D, m, s: D.LogNormal(m, s), [LOC, SCALE], _pos((4,) + B), Q),
    ("poisson", lambda D, r: D.Poisson(r), [RATE * 2], RNG.integers(0, 6, (4,) + B).astype(float), None),
    ("geometric_probs", lambda D, p: D.Geometric(probs=p), [PROBS], RNG.integers(0, 5, B).astype(float), None),
    ("geometric_logits", lambda D, x: D.Geometric(logits=x), [LOGITS], RNG.integers(0, 5, B).astype(float), None),
    ("binomial_probs", lambda D, p: D.Binomial(5, probs=p), [PROBS], RNG.integers(0, 6, (4,) + B).astype(float),
     None),
    ("binomial_logits", lambda D, x: D.Binomial(7, logits=x), [LOGITS], RNG.integers(0, 8, B).astype(float), None),
    ("negative_binomial", lambda D, n, p: D.NegativeBinomial(n, probs=p), [CONC, PROBS],
     RNG.integers(0, 6, (4,) + B).astype(float), None),
    ("negative_binomial_logits", lambda D, n, x: D.NegativeBinomial(n, logits=x), [CONC, LOGITS],
     RNG.integers(0, 6, B).astype(float), None),
    ("one_hot_categorical", lambda D, x: D.OneHotCategorical(logits=x), [CAT_LOGITS],
     np.eye(4)[RNG.integers(0, 4, (5,) + B)], None),
    ("one_hot_categorical_probs", lambda D, p: D.OneHotCategorical(probs=p), [_pos(B + (4,))],
     np.eye(4)[RNG.integers(0, 4, B)], None),
    ("multinomial", lambda D, p: D.Multinomial(4, probs=p), [_pos(B + (3,))],
     np.array([[4.0, 0, 0], [1, 2, 1], [0, 3, 1]])[RNG.integers(0, 3, (2,) + B)], None),
    ("multinomial_logits", lambda D, x: D.Multinomial(3, logits=x), [RNG.standard_normal((2, 3))],
     np.array([[[3.0, 0, 0], [1, 1, 1]], [[0, 2, 1], [0, 0, 3]]]), None),
    ("independent_normal", lambda D, m, s: D.Independent(D.Normal(m, s), 1), [LOC, SCALE],
     RNG.standard_normal((4,) + B), None),
    ("mvn_cov", lambda D, m, a: D.MultivariateNormal(m, covariance_matrix=_cov(a)), [LOC, A3],
     RNG.standard_normal((4,) + B), None),
    ("mvn_cov_bcast", lambda D, m, a: D.MultivariateNormal(m, covariance_matrix=_cov(a)), [LOC[0], A3],
     RNG.standard_normal((5, 1, 3)), None),
    ("mvn_precision", lambda D, m, a: D.MultivariateNormal(m, precision_matrix=_cov(a)), [LOC, A3B],
     RNG.standard_normal(B), None),
    ("mvn_scale_tril", lambda D, m, a: D.MultivariateNormal(m, scale_tril=_tril(a)), [LOC, A3],
     RNG.standard_normal((4,) + B), None),
    ("lowrank_mvn", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [LOC, RNG.standard_normal(B + (2,)),
                                                                              _pos(B)],
     RNG.standard_normal((4,) + B), None),
    ("gamma", lambda D, a, r: D.Gamma(a, r), [CONC, RATE], _pos((4,) + B, 0.1, 4), None),
    ("chi2", lambda D, k: D.Chi2(k), [CONC * 2], _pos((4,) + B, 0.1, 4), None),
    ("beta", lambda D, a, b: D.Beta(a, b), [CONC, RATE], _unit((4,) + B, 0.02, 0.98), None),
    ("dirichlet", lambda D, a: D.Dirichlet(a), [_pos(B + (4,))], RNG.dirichlet(np.ones(4), (5,) + B), None),
    ("student_t", lambda D, df, m, s: D.StudentT(df, m, s), [_pos(B, 0.5, 5), LOC, SCALE],
     RNG.standard_normal((4,) + B), None),
    ("fisher_snedecor", lambda D, a, b: D.FisherSnedecor(a, b), [_pos(B, 1, 6), _pos(B, 1, 9)], _pos((4,) + B), None),
    ("weibull", lambda D, s, k: D.Weibull(s, k), [SCALE, CONC], _pos((4,) + B), Q),
    ("pareto", lambda D, s, a: D.Pareto(s, a), [SCALE, _pos(B, 1, 5)], SCALE + _pos((4,) + B), Q),
    ("kumaraswamy", lambda D, a, b: D.Kumaraswamy(a, b), [CONC, RATE], _unit((4,) + B, 0.02, 0.98), Q),
    ("continuous_bernoulli", lambda D, p: D.ContinuousBernoulli(probs=p),
     [np.array([[0.1, 0.4995, 0.7], [0.3, 0.5004, 0.9]])], _unit((4,) + B, 0.0, 1.0), Q),
    ("continuous_bernoulli_logits", lambda D, x: D.ContinuousBernoulli(logits=x), [LOGITS], _unit(B, 0.0, 1.0), Q),
    ("von_mises", lambda D, m, k: D.VonMises(m, k), [LOC, np.array([[0.5, 2.0, 5.0], [1.0, 3.7, 10.0]])],
     RNG.uniform(-np.pi, np.pi, (4,) + B), None),
    ("relaxed_bernoulli", lambda D, t, p: D.RelaxedBernoulli(t, probs=p), [np.array(0.7), PROBS],
     _unit((4,) + B, 0.05, 0.95), None),
    ("relaxed_one_hot", lambda D, t, x: D.RelaxedOneHotCategorical(t, logits=x), [np.array(0.6), CAT_LOGITS],
     RNG.dirichlet(np.ones(4), (3,) + B), None),
    ("mixture", lambda D, x, m, s: D.MixtureSameFamily(D.Categorical(logits=x), D.Normal(m, s)),
     [RNG.standard_normal(B), LOC, SCALE], RNG.standard_normal((4, 2)), None),
    ("mixture_mvn", lambda D, x, m: D.MixtureSameFamily(
        D.Categorical(logits=x), D.Independent(D.Normal(m, m.exp()), 1)),
     [RNG.standard_normal(2), RNG.standard_normal((2, 3))], RNG.standard_normal((4, 3)), None),
    ("transformed_affine_exp", lambda D, m, s, a, b: D.TransformedDistribution(
        D.Normal(m, s), [D.AffineTransform(a, b), D.ExpTransform()]),
     [LOC, SCALE, RNG.standard_normal(B), _pos(B)], _pos((4,) + B), Q),
    ("transformed_sigmoid", lambda D, m, s: D.TransformedDistribution(D.Normal(m, s), D.SigmoidTransform()),
     [LOC, SCALE], _unit((4,) + B, 0.02, 0.98), Q),
    ("transformed_tanh_neg", lambda D, m, s: D.TransformedDistribution(
        D.Normal(m, s), [D.TanhTransform(), D.AffineTransform(0.0, -2.0)]), [LOC, SCALE],
     _unit((4,) + B, -1.9, 1.9), Q),
    ("transformed_power", lambda D, r, e: D.TransformedDistribution(D.Exponential(r), D.PowerTransform(e)),
     [RATE, _pos(B)], _pos((4,) + B), Q),
]
