"""ember.distributions against torch.distributions: log_prob, entropy, moments, KL and their gradients; sample
shapes, dtypes and statistics; rsample's gradient; argument validation with PyTorch's messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((3, 4))
PROBS = RNG.uniform(0.1, 1.0, (3, 4))
LOC, SCALE = RNG.standard_normal((2, 3)), RNG.uniform(0.5, 2.0, (2, 3))
P01 = RNG.uniform(0.05, 0.95, (5,))

# (name, build(lib_module, *params), params, value to score)
CASES = [
    ("categorical_logits", lambda D, p: D.Categorical(logits=p), [LOGITS], np.array([0, 3, 1])),
    ("categorical_probs", lambda D, p: D.Categorical(probs=p), [PROBS], np.array([[2, 0, 1], [3, 3, 0]])),
    ("normal", lambda D, m, s: D.Normal(m, s), [LOC, SCALE], RNG.standard_normal((4, 2, 3))),
    ("normal_broadcast", lambda D, m, s: D.Normal(m, s), [LOC, SCALE[:1]], RNG.standard_normal((2, 3))),
    ("bernoulli_probs", lambda D, p: D.Bernoulli(probs=p), [P01], np.array([1.0, 0.0, 1.0, 1.0, 0.0])),
    ("bernoulli_logits", lambda D, p: D.Bernoulli(logits=p), [LOGITS[0]], np.array([[0.0, 1, 1, 0], [1, 1, 0, 0]])),
]


def _both(build, params, value):
    """The same distribution in Ember and in torch, with float64 parameters requiring grad."""
    ep = [em.tensor(p, requires_grad=True) for p in params]
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    return build(ed, *ep), build(td, *tp), ep, tp, em.tensor(value), torch.tensor(value)


def _close(a, b, what):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12, equal_nan=True,
                               err_msg=what)


@pytest.mark.parametrize(("name", "build", "params", "value"), CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, build, params, value) -> None:
    """log_prob, entropy, mean, variance, probs/logits and shapes agree; so do the gradients of log_prob and entropy."""
    e, t, ep, tp, ev, tv = _both(build, params, value)
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape)
    for attr in ("mean", "variance"):
        _close(getattr(e, attr), getattr(t, attr), f"{name}.{attr}")
    if hasattr(t, "probs"):
        _close(e.probs, t.probs, f"{name}.probs")
        _close(e.logits, t.logits, f"{name}.logits")
    lp_e, lp_t = e.log_prob(ev), t.log_prob(tv)
    _close(lp_e, lp_t, f"{name}.log_prob")
    _close(e.entropy(), t.entropy(), f"{name}.entropy")
    w = np.random.default_rng(1).standard_normal(tuple(lp_t.shape))
    obj_e = (lp_e * em.tensor(w)).sum() + e.entropy().sum()
    obj_t = (lp_t * torch.tensor(w)).sum() + t.entropy().sum()
    for k, (ge, gt) in enumerate(zip(em.autograd.grad(obj_e, ep), torch.autograd.grad(obj_t, tp))):
        _close(ge, gt, f"{name}: gradient of parameter {k}")


@pytest.mark.parametrize(("name", "build", "params", "value"), CASES, ids=[c[0] for c in CASES])
def test_kl_divergence_matches_torch(name, build, params, value) -> None:
    """kl_divergence(p, q) and its gradients, for q from shifted parameters."""
    e, t, ep, tp, _, _ = _both(build, params, value)
    shifted = [p * 0.8 + 0.05 for p in params]
    e2, t2 = build(ed, *[em.tensor(p) for p in shifted]), build(td, *[torch.tensor(p) for p in shifted])
    kl_e, kl_t = ed.kl_divergence(e, e2), td.kl_divergence(t, t2)
    _close(kl_e, kl_t, f"{name}: kl")
    for ge, gt in zip(em.autograd.grad(kl_e.sum(), ep), torch.autograd.grad(kl_t.sum(), tp)):
        _close(ge, gt, f"{name}: kl gradient")


def test_sample_shapes_dtypes_and_statistics() -> None:
    """Samples have torch's shapes and dtypes, and their frequencies and moments match the parameters."""
    em.manual_seed(0)
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
    c = ed.Categorical(probs=em.tensor(probs))
    s = c.sample((20000,))
    assert s.shape == (20000, 2) and s.dtype == em.int64
    freq = np.stack([(s.numpy() == k).mean(0) for k in range(3)], -1)
    np.testing.assert_allclose(freq, probs, atol=0.015)  # 4 standard errors of a frequency near 0.5
    n = ed.Normal(em.tensor([1.0, -2.0]), em.tensor([0.5, 2.0]))
    x = n.sample((20000,))
    assert x.shape == (20000, 2) and x.dtype == em.float32 and not x.requires_grad
    np.testing.assert_allclose(x.numpy().mean(0), [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(x.numpy().std(0), [0.5, 2.0], rtol=0.03)
    b = ed.Bernoulli(probs=em.tensor([0.2, 0.9]))
    y = b.sample((20000,))
    assert y.shape == (20000, 2) and y.dtype == em.float32
    np.testing.assert_allclose(y.numpy().mean(0), [0.2, 0.9], atol=0.015)
    assert ed.Normal(0.0, 1.0).sample().shape == tuple(td.Normal(0.0, 1.0).sample().shape)
    assert c.sample().shape == tuple(td.Categorical(probs=torch.tensor(probs)).sample().shape)


def test_sampling_follows_the_seed() -> None:
    """The same ember.manual_seed gives the same samples."""
    def draw():
        em.manual_seed(3)
        return ed.Categorical(logits=em.zeros(5)).sample((10,)).numpy(), ed.Normal(0.0, 1.0).rsample((3,)).numpy()

    (a1, b1), (a2, b2) = draw(), draw()
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)


def test_rsample_is_differentiable_and_sample_is_not() -> None:
    """Normal.rsample = loc + eps * scale carries gradients; sample does not; Categorical has no rsample."""
    loc, scale = em.tensor([0.5, -1.0], requires_grad=True), em.tensor([2.0, 0.5], requires_grad=True)
    em.manual_seed(1)
    z = ed.Normal(loc, scale).rsample((1000,))
    g_loc, g_scale = em.autograd.grad(z.sum(), [loc, scale])
    np.testing.assert_allclose(g_loc.numpy(), [1000.0, 1000.0])
    eps = (z.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(g_scale.numpy(), eps.sum(0).numpy(), rtol=1e-5)
    assert not ed.Normal(loc, scale).sample().requires_grad
    assert td.Normal(0.0, 1.0).has_rsample and not td.Categorical(logits=torch.zeros(2)).has_rsample
    assert ed.Normal.has_rsample and not ed.Categorical.has_rsample and not ed.Bernoulli.has_rsample
    with pytest.raises(NotImplementedError, match="Categorical has no rsample"):
        ed.Categorical(logits=em.zeros(2)).rsample()


ERRORS = [
    (lambda D, T: D.Normal(T([0.0, 0.0]), T([1.0, -1.0])),
     "Expected parameter scale (Tensor of shape (2,)) of distribution Normal("),
    (lambda D, T: D.Categorical(probs=T([0.5, 0.5]), logits=T([0.0, 0.0])),
     "Either `probs` or `logits` must be specified, but not both."),
    (lambda D, T: D.Bernoulli(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda D, T: D.Categorical(probs=T(0.5)), "`probs` parameter must be at least one-dimensional."),
    (lambda D, T: D.Bernoulli(probs=T([1.5])),
     "to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0), but found invalid values:"),
    (lambda D, T: D.Categorical(probs=T([0.2, 0.8])).log_prob(T(3).long()),
     "Expected value argument (Tensor of shape ()) to be within the support (IntegerInterval(lower_bound=0, "
     "upper_bound=1)) of the distribution Categorical(probs: "),
    (lambda D, T: D.Bernoulli(T([0.3])).log_prob(T([0.5])), "to be within the support (Boolean())"),
    (lambda D, T: D.Normal(T([0.0, 0.0]), 1.0).log_prob(T([0.0, 0.0, 0.0])),
     "Value is not broadcastable with batch_shape+event_shape:"),
]


@pytest.mark.parametrize(("make", "message"), ERRORS)
def test_validation_errors_match_torch(make, message: str) -> None:
    """Invalid parameters and values raise ValueError with PyTorch's message (Ember's is on one line)."""
    with pytest.raises(ValueError) as theirs:
        make(td, torch.tensor)
    assert message in str(theirs.value)
    with pytest.raises(ValueError) as ours:
        make(ed, em.tensor)
    assert message in str(ours.value) and "\n" not in str(ours.value)


def test_validation_can_be_turned_off() -> None:
    """validate_args=False skips the checks, as in PyTorch."""
    ed.Normal(em.tensor([0.0]), em.tensor([-1.0]), validate_args=False)
    ed.Categorical(probs=em.tensor([0.2, 0.8]), validate_args=False).log_prob(em.tensor(1))
