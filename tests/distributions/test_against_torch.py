"""Every distribution in tests/distributions/cases.py against torch.distributions: shapes, log_prob, entropy,
moments, cdf/icdf and their gradients in the parameters, in float64 (tight) and float32."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed
from tests.distributions.cases import CASES

_IDS = [c[0] for c in CASES]
# torch's Multinomial.entropy takes lgamma of an int64 tensor, which it computes in float32: Ember's is the float64
# value, 2e-8 away
_LOOSE = {(n, q): 1e-7 for n in ("multinomial", "multinomial_logits") for q in ("entropy", "perplexity")}
# torch 2.13's Kumaraswamy.mode swaps the two concentrations (NaN whenever concentration0 > 1):
# see test_kumaraswamy_mode
_NOT_TORCHS = {("kumaraswamy", "mode")}


def _build(build, params, dtype):
    ep = [em.tensor(p, dtype=getattr(em, dtype), requires_grad=True) for p in params]
    tp = [torch.tensor(p, dtype=getattr(torch, dtype), requires_grad=True) for p in params]
    return build(ed, *ep), build(td, *tp), ep, tp


def _quantities(d, value, q, lib):
    """name -> a thunk computing it, for every quantity the distribution may have."""
    out = {
        "mean": lambda: d.mean, "variance": lambda: d.variance, "stddev": lambda: d.stddev, "mode": lambda: d.mode,
        "entropy": lambda: d.entropy(), "log_prob": lambda: d.log_prob(value), "cdf": lambda: d.cdf(value),
    }
    if q is not None:
        out["icdf"] = lambda: d.icdf(q)
    for attr in ("probs", "logits", "covariance_matrix", "precision_matrix", "scale_tril", "temperature", "df",
                 "concentration1", "concentration0", "perplexity"):
        if hasattr(type(d), attr) or attr in d.__dict__:  # the parameters in their other forms
            out[attr] = (lambda a: lambda: getattr(d, a)() if a == "perplexity" else getattr(d, a))(attr)
    return out


def _try(thunk):
    try:
        return thunk()
    except NotImplementedError:
        return NotImplemented


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _grads(out, params, lib):
    if not out.requires_grad:
        return [np.zeros(tuple(p.shape)) for p in params]
    w = np.random.default_rng(1).standard_normal(tuple(out.shape))
    if lib is torch:
        obj = (out * torch.tensor(w, dtype=out.dtype)).sum()
        gs = torch.autograd.grad(obj, params, allow_unused=True, retain_graph=True)
    else:
        obj = (out * em.tensor(w, dtype=out.dtype)).sum()
        gs = em.autograd.grad(obj, params, allow_unused=True, retain_graph=True)
    return [np.zeros(tuple(p.shape)) if g is None else _np(g) for g, p in zip(gs, params)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "build", "params", "value", "q"), CASES, ids=_IDS)
def test_matches_torch(name, build, params, value, q, dtype) -> None:
    """Each quantity torch has agrees (NaN and inf where torch's are), so does its gradient; where torch raises
    NotImplementedError, so does Ember."""
    e, t, ep, tp = _build(build, params, dtype)
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape), name
    assert e.has_rsample == t.has_rsample and e.has_enumerate_support == t.has_enumerate_support, name
    rtol, atol = (1e-9, 1e-11) if dtype == "float64" else (2e-4, 2e-5)
    ev, tv = em.tensor(value, dtype=getattr(em, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
    eq = None if q is None else em.tensor(q, dtype=getattr(em, dtype))
    tq = None if q is None else torch.tensor(q, dtype=getattr(torch, dtype))
    tq_all, eq_all = _quantities(t, tv, tq, torch), _quantities(e, ev, eq, em)
    for what, thunk in tq_all.items():
        if (name, what) in _NOT_TORCHS:
            continue
        assert what in eq_all, f"{name}: Ember has no {what}"
        got_t, got_e = _try(thunk), _try(eq_all[what])
        if got_t is NotImplemented:
            assert got_e is NotImplemented, f"{name}.{what}: torch has none, Ember returned one"
            continue
        assert got_e is not NotImplemented, f"{name}.{what}: Ember raised NotImplementedError"
        assert tuple(got_e.shape) == tuple(got_t.shape), f"{name}.{what}: shape {tuple(got_e.shape)} vs torch"
        tol = max(rtol, _LOOSE.get((name, what), 0.0))
        np.testing.assert_allclose(_np(got_e).astype(float), _np(got_t).astype(float), rtol=tol, atol=atol,
                                   equal_nan=True, err_msg=f"{name}.{what} ({dtype})")
        if dtype == "float64" and got_t.dtype.is_floating_point and got_t.requires_grad:
            ge_all, gt_all = _try(lambda: _grads(got_e, ep, em)), _try(lambda: _grads(got_t, tp, torch))
            if gt_all is NotImplemented:  # e.g. Gamma.cdf: gammainc has no derivative in its shape parameter
                assert ge_all is NotImplemented, f"{name}: d {what}: torch raises NotImplementedError, Ember not"
                continue
            for k, (ge, gt) in enumerate(zip(ge_all, gt_all)):
                np.testing.assert_allclose(ge, gt, rtol=max(1e-8, tol), atol=1e-10, equal_nan=True,
                                           err_msg=f"{name}: d {what} / d param {k}")


@pytest.mark.parametrize(("name", "build", "params", "value", "q"), CASES, ids=_IDS)
def test_sample_shapes_and_expand(name, build, params, value, q) -> None:
    """sample(shape) has torch's shape and dtype; expand gives torch's batch shape and the same log_prob."""
    e, t, _, _ = _build(build, params, "float64")
    for shape in [(), (5,), (2, 3)]:
        se, st = e.sample(shape), t.sample(shape)
        assert tuple(se.shape) == tuple(st.shape), f"{name}: sample{shape}"
        assert str(se.dtype).split(".")[-1] == str(st.dtype).split(".")[-1], f"{name}: sample dtype"
        assert not se.requires_grad
    check_rsample_and_expand(e, t, value, name)


def check_rsample_and_expand(e, t, value, name: str) -> None:
    """rsample has torch's shape; expand gives torch's batch shape, the same log_prob and samples of its shape."""
    if e.has_rsample:
        assert tuple(e.rsample((3,)).shape) == tuple(t.rsample((3,)).shape)
    big = (4,) + tuple(t.batch_shape)
    ex, tx = e.expand(big), t.expand(big)
    assert type(ex) is type(e) and ex.batch_shape == tuple(tx.batch_shape) and ex.event_shape == e.event_shape
    extra = value.ndim - len(e.batch_shape) - len(e.event_shape)
    value = value[(0,) * extra] if extra > 0 else value  # one value per distribution, broadcast to the new batch
    np.testing.assert_allclose(_np(ex.log_prob(em.tensor(value))), _np(tx.log_prob(torch.tensor(value))), rtol=1e-9,
                               atol=1e-11, err_msg=f"{name}: expanded log_prob")
    assert tuple(ex.sample((2,)).shape) == (2,) + big + e.event_shape


def test_kumaraswamy_mode() -> None:
    """The mode is the density's maximum (found on a fine grid) where both concentrations are >= 1, else NaN."""
    a = np.array([3.0, 1.5, 1.0, 0.5, 2.0])
    b = np.array([4.0, 1.2, 1.5, 2.0, 0.7])
    mode = ed.Kumaraswamy(em.tensor(a), em.tensor(b)).mode.numpy()
    x = np.linspace(1e-6, 1 - 1e-6, 400001)
    for i in range(3):
        log_pdf = (a[i] - 1) * np.log(x) + (b[i] - 1) * np.log1p(-(x ** a[i]))
        assert abs(mode[i] - x[np.argmax(log_pdf)]) < 1e-5
    assert np.isnan(mode[3:]).all()
