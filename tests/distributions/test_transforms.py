"""Transforms against torch.distributions.transforms: forward, inverse, log|det J| and their gradients, sign,
domains, shapes, caching, composition and equality."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

R = np.random.default_rng(3)
X = R.standard_normal((4, 3))
POS = R.uniform(0.2, 3.0, (4, 3))
LOC3, SCALE3, EXP3 = R.standard_normal(3), R.uniform(0.5, 2, 3), R.uniform(0.5, 2.0, 3)

# (name, build(lib, T) -> transform, input x in the domain)
TRANSFORMS = [
    ("exp", lambda D, T: D.ExpTransform(), X),
    ("exp_inv", lambda D, T: D.ExpTransform().inv, POS),
    ("affine_number", lambda D, T: D.AffineTransform(1.5, -2.0), X),
    ("affine_tensor", lambda D, T: D.AffineTransform(T(LOC3), T(SCALE3)), X),
    ("affine_event", lambda D, T: D.AffineTransform(T(LOC3), T(SCALE3), event_dim=1), X),
    ("sigmoid", lambda D, T: D.SigmoidTransform(), X),
    ("tanh", lambda D, T: D.TanhTransform(), X),
    ("softplus", lambda D, T: D.SoftplusTransform(), X),
    ("power", lambda D, T: D.PowerTransform(T(EXP3)), POS),
    ("power_negative", lambda D, T: D.PowerTransform(T(-1.5)), POS),
    ("abs", lambda D, T: D.AbsTransform(), X),
    ("softmax", lambda D, T: D.SoftmaxTransform(), X),
    ("compose", lambda D, T: D.ComposeTransform([D.AffineTransform(0.5, 2.0), D.ExpTransform(),
                                                 D.PowerTransform(T(0.5))]), X),
    ("compose_event", lambda D, T: D.ComposeTransform([D.ExpTransform(), D.AffineTransform(
        T(LOC3), T(SCALE3), event_dim=1)]), X),
    ("independent", lambda D, T: D.IndependentTransform(D.SigmoidTransform(), 1), X),
]

_T = {ed: lambda a: em.tensor(a, dtype=em.float64), td: lambda a: torch.tensor(a, dtype=torch.float64)}


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize(("name", "build", "x"), TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_matches_torch(name, build, x) -> None:
    """Values and x-gradients of y = t(x), t.inv(y) and log|det J|; sign, bijective, domains and shapes."""
    e, t = build(ed, _T[ed]), build(td, _T[td])
    xe, xt = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, yt = e(xe), t(xt)
    np.testing.assert_allclose(_np(ye), _np(yt), rtol=1e-12, atol=1e-14, err_msg=f"{name}: forward")
    np.testing.assert_allclose(_np(e.inv(ye)), _np(t.inv(yt)), rtol=1e-10, atol=1e-12, err_msg=f"{name}: inverse")
    try:
        jt = t.log_abs_det_jacobian(xt, yt)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            e.log_abs_det_jacobian(xe, ye)
        jt = None
    objs = [(ye, yt)]
    if jt is not None:
        je = e.log_abs_det_jacobian(xe, ye)
        assert tuple(je.shape) == tuple(jt.shape)
        np.testing.assert_allclose(_np(je), _np(jt), rtol=1e-11, atol=1e-13, err_msg=f"{name}: log|det J|")
        objs.append((je, jt))
    for oe, ot in objs:
        if not ot.requires_grad:  # an affine map's log|det J| does not depend on x
            assert not oe.requires_grad
            continue
        w = R.standard_normal(tuple(ot.shape))
        (ge,) = em.autograd.grad((oe * em.tensor(w)).sum(), [xe], retain_graph=True)
        (gt,) = torch.autograd.grad((ot * torch.tensor(w)).sum(), [xt], retain_graph=True)
        np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{name}: gradient")
    assert e.bijective == t.bijective
    try:
        st = t.sign
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            e.sign  # noqa: B018
    else:
        np.testing.assert_array_equal(_np(e.sign), _np(st))
    assert repr(e.domain) == repr(t.domain) and repr(e.codomain) == repr(t.codomain), name
    assert e.domain.event_dim == t.domain.event_dim and e.codomain.event_dim == t.codomain.event_dim
    for shape in [(3,), (5, 4, 3)]:
        assert e.forward_shape(shape) == tuple(t.forward_shape(torch.Size(shape)))
        assert e.inverse_shape(shape) == tuple(t.inverse_shape(torch.Size(shape)))
    assert e.inv.inv is e


def test_cache_equality_and_repr() -> None:
    """With cache_size=1 inverting the last output returns the input itself; equality and reprs follow torch."""
    t = ed.ExpTransform(cache_size=1)
    x = em.tensor([-50.0, 0.0, 1.0])
    y = t(x)
    assert t.inv(y) is x and t(x) is y
    assert ed.ExpTransform() == ed.ExpTransform() and ed.ExpTransform() != ed.SigmoidTransform()
    assert ed.AffineTransform(1.0, 2.0) == ed.AffineTransform(1.0, 2.0) != ed.AffineTransform(1.0, 3.0)
    assert ed.PowerTransform(em.tensor(2.0)) == ed.PowerTransform(em.tensor(2.0))
    assert ed.ExpTransform().inv == ed.ExpTransform().inv
    assert ed.ComposeTransform([ed.ExpTransform()]) == ed.ComposeTransform([ed.ExpTransform()])
    assert repr(ed.ExpTransform().inv) == repr(td.ExpTransform().inv)
    assert repr(ed.ComposeTransform([ed.ExpTransform(), ed.TanhTransform()])) == repr(
        td.ComposeTransform([td.ExpTransform(), td.TanhTransform()]))
    with pytest.raises(ValueError, match="cache_size"):
        ed.ExpTransform(cache_size=2)
    with pytest.raises(ValueError, match="Transform or a list"):
        ed.TransformedDistribution(ed.Normal(0.0, 1.0), [ed.ExpTransform(), "exp"])


def test_transformed_distribution_shapes() -> None:
    """A transform with a larger batch broadcasts the base; an event-dim transform makes an event; sample shapes."""
    loc = em.tensor(R.standard_normal(3))
    d = ed.TransformedDistribution(ed.Normal(0.0, 1.0), ed.AffineTransform(loc, 2.0))
    t = td.TransformedDistribution(td.Normal(0.0, 1.0), td.AffineTransform(torch.tensor(loc.numpy()), 2.0))
    assert d.batch_shape == tuple(t.batch_shape) == (3,)
    ev = ed.TransformedDistribution(ed.Normal(em.zeros(4, 3), 1.0), ed.AffineTransform(loc, 2.0, event_dim=1))
    tv = td.TransformedDistribution(td.Normal(torch.zeros(4, 3), 1.0),
                                    td.AffineTransform(torch.tensor(loc.numpy()), 2.0, event_dim=1))
    assert ev.batch_shape == tuple(tv.batch_shape) and ev.event_shape == tuple(tv.event_shape) == (3,)
    v = R.standard_normal((2, 4, 3))
    np.testing.assert_allclose(ev.log_prob(em.tensor(v)).numpy(), tv.log_prob(torch.tensor(v)).numpy(), rtol=1e-6)
    assert tuple(ev.sample((5,)).shape) == (5, 4, 3) and repr(ev.support) == repr(tv.support)
    sm = ed.TransformedDistribution(ed.Normal(em.zeros(3), 1.0), ed.SoftmaxTransform())
    assert sm.event_shape == (3,) and tuple(sm.sample((2,)).shape) == (2, 3)
