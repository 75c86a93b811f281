"""The structural transforms against torch.distributions.transforms (stick breaking, Cholesky factors, correlation
Cholesky factors, reshape, cat, stack, cumulative distribution): forward, inverse, log|det J| and their gradients
in float64 and float32, round trips, domains, shapes, caching, equality and errors; the tril-vector helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td
from torch.distributions import utils as tdu

import ember as em
import ember.distributions as ed
from ember.distributions import distribution as edd

R = np.random.default_rng(11)
X = R.standard_normal((4, 3))
X6 = R.standard_normal((4, 6))
X1 = R.standard_normal((4, 1))
M3 = R.standard_normal((2, 3, 3))
SIMPLEX = R.dirichlet(np.ones(4), 5)
POS = R.uniform(0.2, 3.0, (4, 3))


def _corr_cholesky(shape, d):
    """Cholesky factors of correlation matrices: lower-triangular, positive diagonal, rows of unit norm."""
    a = np.tril(R.standard_normal(shape + (d, d)))
    idx = np.arange(d)
    a[..., idx, idx] = np.abs(a[..., idx, idx]) + 0.3
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


CORR = _corr_cholesky((3,), 4)

# (name, build(lib, T) -> transform, input x in the domain)
TRANSFORMS = [
    ("stick_breaking", lambda D, T: D.StickBreakingTransform(), X),
    ("stick_breaking_inv", lambda D, T: D.StickBreakingTransform().inv, SIMPLEX),
    ("lower_cholesky", lambda D, T: D.LowerCholeskyTransform(), M3),
    ("positive_definite", lambda D, T: D.PositiveDefiniteTransform(), M3),
    ("corr_cholesky_2", lambda D, T: D.CorrCholeskyTransform(), X1),
    ("corr_cholesky_3", lambda D, T: D.CorrCholeskyTransform(), X),
    ("corr_cholesky_4", lambda D, T: D.CorrCholeskyTransform(), X6),
    ("corr_cholesky_inv", lambda D, T: D.CorrCholeskyTransform().inv, CORR),
    ("reshape", lambda D, T: D.ReshapeTransform((4, 3), (2, 6)), R.standard_normal((5, 4, 3))),
    ("reshape_event_dims", lambda D, T: D.ReshapeTransform((3,), (3, 1, 1)), X),
    ("cat_batch_dim", lambda D, T: D.CatTransform([D.ExpTransform(), D.SoftplusTransform()], dim=0,
                                                    lengths=[1, 3]), X),
    ("cat_event_dim", lambda D, T: D.CatTransform(
        [D.ExpTransform(), D.identity_transform, D.AffineTransform(1.0, T(2.5))], dim=-1), X),
    ("cat_summed", lambda D, T: D.CatTransform(
        [D.IndependentTransform(D.SigmoidTransform(), 1), D.IndependentTransform(D.ExpTransform(), 1)], dim=-1,
        lengths=[2, 1]), X),
    ("stack", lambda D, T: D.StackTransform([D.ExpTransform(), D.SigmoidTransform(), D.AffineTransform(0.5, 3.0)],
                                            dim=1), X),
    ("stack_negative_dim", lambda D, T: D.StackTransform([D.TanhTransform(), D.SoftplusTransform()] * 2, dim=-2),
     R.standard_normal((3, 4, 2))),
    ("cdf_normal", lambda D, T: D.CumulativeDistributionTransform(D.Normal(T(0.5), T(2.0))), X),
    ("cdf_exponential", lambda D, T: D.CumulativeDistributionTransform(D.Exponential(T([0.5, 1.0, 2.0]))), POS),
    ("compose_stick_breaking", lambda D, T: D.ComposeTransform([D.AffineTransform(T(0.3), T(1.7)),
                                                                D.StickBreakingTransform()]), X),
]
_TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6)}


def _lib_tensor(lib, dtype):
    if lib is ed:
        return lambda a: em.tensor(a, dtype=getattr(em, dtype))
    return lambda a: torch.tensor(a, dtype=getattr(torch, dtype))


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _outcome(thunk):
    """thunk()'s value, or the class of the exception it raised."""
    try:
        return thunk()
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc)


def _shape_outcome(thunk):
    out = _outcome(thunk)
    return out if isinstance(out, type) else tuple(out)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "build", "x"), TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_matches_torch(name, build, x, dtype) -> None:
    """Values (and in float64 the x-gradients) of y = t(x), t.inv(y) and log|det J|; bijective, sign, domains,
    event dims and shapes, including the shapes each refuses."""
    rtol, atol = _TOL[dtype]
    e, t = build(ed, _lib_tensor(ed, dtype)), build(td, _lib_tensor(td, dtype))
    xe = em.tensor(x, dtype=getattr(em, dtype), requires_grad=True)
    xt = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    ye, yt = e(xe), t(xt)
    assert tuple(ye.shape) == tuple(yt.shape), name
    np.testing.assert_allclose(_np(ye), _np(yt), rtol=rtol, atol=atol, err_msg=f"{name}: forward")
    np.testing.assert_allclose(_np(e.inv(ye)), _np(t.inv(yt)), rtol=rtol * 10, atol=atol * 10,
                               err_msg=f"{name}: inverse")
    jt = _outcome(lambda: t.log_abs_det_jacobian(xt, yt))
    objs = [(ye, yt)]
    if isinstance(jt, type):
        with pytest.raises(jt):
            e.log_abs_det_jacobian(xe, ye)
    else:
        je = e.log_abs_det_jacobian(xe, ye)
        assert tuple(je.shape) == tuple(jt.shape), f"{name}: log|det J| shape"
        np.testing.assert_allclose(_np(je), _np(jt), rtol=rtol * 10, atol=atol * 10, err_msg=f"{name}: log|det J|")
        objs.append((je, jt))
    if dtype == "float64":
        for oe, ot in objs:
            if not ot.requires_grad:
                continue
            w = R.standard_normal(tuple(ot.shape))
            (ge,) = em.autograd.grad((oe * em.tensor(w)).sum(), [xe], retain_graph=True)
            (gt,) = torch.autograd.grad((ot * torch.tensor(w)).sum(), [xt], retain_graph=True)
            np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-9, atol=1e-11, err_msg=f"{name}: gradient")
    assert e.bijective == t.bijective, name
    st = _outcome(lambda: t.sign)
    if isinstance(st, type):
        with pytest.raises(st):
            e.sign  # noqa: B018
    else:
        np.testing.assert_array_equal(_np(e.sign), _np(st))
    assert repr(e.domain) == repr(t.domain) and repr(e.codomain) == repr(t.codomain), name
    assert e.domain.event_dim == t.domain.event_dim and e.codomain.event_dim == t.codomain.event_dim, name
    for shape in [tuple(x.shape), tuple(yt.shape), (3,), (5, 4, 3), ()]:
        assert _shape_outcome(lambda: e.forward_shape(shape)) == _shape_outcome(
            lambda: t.forward_shape(torch.Size(shape))), f"{name}: forward_shape{shape}"
        assert _shape_outcome(lambda: e.inverse_shape(shape)) == _shape_outcome(
            lambda: t.inverse_shape(torch.Size(shape))), f"{name}: inverse_shape{shape}"
    assert e.inv.inv is e


BIJECTIVE = [c for c in TRANSFORMS if c[0] not in {"lower_cholesky", "positive_definite", "stick_breaking_inv",
                                                   "corr_cholesky_inv"}]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "build", "x"), BIJECTIVE, ids=[t[0] for t in BIJECTIVE])
def test_round_trip(name, build, x, dtype) -> None:
    """inverse(forward(x)) is x, computed afresh (no cache)."""
    t = build(ed, _lib_tensor(ed, dtype))
    y = t(em.tensor(x, dtype=getattr(em, dtype)))
    back = t.inv(em.tensor(y.numpy(), dtype=getattr(em, dtype))).numpy()
    rtol, atol = (1e-9, 1e-10) if dtype == "float64" else (1e-4, 1e-5)
    np.testing.assert_allclose(back, x, rtol=rtol, atol=atol, err_msg=name)


def test_matrix_round_trips_and_landing() -> None:
    """LowerCholesky and PositiveDefinite land in their codomains; their inverses undo them on what they reach, and
    CorrCholesky's inverse undoes it on any correlation Cholesky factor."""
    x = em.tensor(M3)
    lower = ed.LowerCholeskyTransform()
    pd = ed.PositiveDefiniteTransform()
    assert bool(ed.constraints.lower_cholesky.check(lower(x)).all())
    assert bool(ed.constraints.positive_definite.check(pd(x)).all())
    np.testing.assert_allclose(lower.inv(lower(x)).numpy(), np.tril(M3), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pd.inv(pd(x)).numpy(), np.tril(M3), rtol=1e-9, atol=1e-12)
    corr = ed.CorrCholeskyTransform()
    y = em.tensor(CORR)
    np.testing.assert_allclose(corr(corr.inv(y)).numpy(), CORR, rtol=1e-9, atol=1e-12)
    for n in (1, 3, 6, 10):
        z = corr(em.tensor(R.standard_normal((7, n)) * 3))
        assert bool(ed.constraints.corr_cholesky.check(z).all()), n
    simplex = ed.StickBreakingTransform()(em.tensor(R.standard_normal((6, 5)) * 4))
    assert bool(ed.constraints.simplex.check(simplex).all())


def test_transformed_distributions_match_torch() -> None:
    """log_prob through the new transforms: a Gaussian copula (MVN pushed through Normal's cdf), a reshaped normal
    and a stick-broken normal."""
    a = R.standard_normal((3, 3)) * 0.4
    tril = np.tril(a, -1) + np.diag(np.exp(np.diag(a)))
    u = R.uniform(0.05, 0.95, (4, 3))

    def copula(D, T):
        return D.TransformedDistribution(D.MultivariateNormal(T(np.zeros(3)), scale_tril=T(tril)),
                                         [D.CumulativeDistributionTransform(D.Normal(T(0.0), T(1.0)))])

    def reshaped(D, T):
        return D.TransformedDistribution(D.Normal(T(np.zeros(6)), T(np.full(6, 1.5))),
                                         [D.ReshapeTransform((6,), (2, 3))])

    def stick(D, T):
        return D.TransformedDistribution(D.Normal(T(np.zeros((2, 3))), T(np.ones((2, 3)))),
                                         [D.StickBreakingTransform()])

    for build, value in [(copula, u), (reshaped, R.standard_normal((5, 2, 3))), (stick, SIMPLEX[:, None, :])]:
        e, t = build(ed, _lib_tensor(ed, "float64")), build(td, _lib_tensor(td, "float64"))
        assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape)
        np.testing.assert_allclose(e.log_prob(em.tensor(value)).numpy(), t.log_prob(torch.tensor(value)).numpy(),
                                   rtol=1e-10, atol=1e-12)


def test_cache_equality_and_repr() -> None:
    """cache_size=1 hands back the input a cached output came from; equality and reprs are torch's (the functors and
    CorrCholeskyTransform compare by identity there too)."""
    for t in [ed.CatTransform([ed.ExpTransform(), ed.TanhTransform()], dim=-1, cache_size=1),
              ed.StackTransform([ed.ExpTransform(), ed.TanhTransform()], dim=-1).with_cache(1),
              ed.ReshapeTransform((2,), (1, 2), cache_size=1), ed.StickBreakingTransform(cache_size=1),
              ed.CorrCholeskyTransform().with_cache(1)]:
        x = em.tensor(R.standard_normal((3, 2)) if not isinstance(t, ed.CorrCholeskyTransform) else X)
        y = t(x)
        assert t.inv(y) is x and t(x) is y, t
    assert ed.CatTransform([ed.ExpTransform()], cache_size=1).transforms[0]._cache_size == 1
    pairs = [(lambda D: D.StickBreakingTransform()), (lambda D: D.LowerCholeskyTransform()),
             (lambda D: D.PositiveDefiniteTransform()), (lambda D: D.CorrCholeskyTransform()),
             (lambda D: D.ReshapeTransform((2,), (2,))), (lambda D: D.CatTransform([D.ExpTransform()])),
             (lambda D: D.StackTransform([D.ExpTransform()]))]
    for make in pairs:
        assert (make(ed) == make(ed)) == (make(td) == make(td)), make(td)
        assert repr(make(ed)) == repr(make(td))
    assert ed.StickBreakingTransform() != ed.LowerCholeskyTransform()
    assert ed.identity_transform is ed.transforms.identity_transform
    assert repr(ed.identity_transform) == repr(td.identity_transform)


def test_errors_are_torchs() -> None:
    """Bad arguments raise what torch raises."""
    cases = [
        lambda D, T: D.ReshapeTransform((2, 3), (5,)),
        lambda D, T: D.CatTransform([D.ExpTransform(), "exp"]),
        lambda D, T: D.CatTransform([D.ExpTransform()], lengths=[1, 2]),
        lambda D, T: D.CatTransform([D.ExpTransform(), D.ExpTransform()], dim=0, lengths=[1, 1])(T(X)),
        lambda D, T: D.CatTransform([D.ExpTransform()], dim=3)(T(X)),
        lambda D, T: D.StackTransform([D.ExpTransform()] * 2, dim=1)(T(X)),
        lambda D, T: D.StackTransform([D.ExpTransform(), 1.0]),
        lambda D, T: D.ReshapeTransform((4, 3), (12,)).forward_shape((3, 4)),
        lambda D, T: D.CorrCholeskyTransform().forward_shape((4,)),
        lambda D, T: D.StickBreakingTransform().sign,
        lambda D, T: D.LowerCholeskyTransform().log_abs_det_jacobian(T(M3), T(M3)),
        lambda D, T: D.constraints.cat([D.constraints.real, None]),
        lambda D, T: D.constraints.stack([D.constraints.real], dim=5).check(T(X)),
    ]
    for make in cases:
        expected = _outcome(lambda: make(td, _lib_tensor(td, "float64")))
        assert isinstance(expected, type) and issubclass(expected, Exception)
        with pytest.raises(expected) as info:
            make(ed, _lib_tensor(ed, "float64"))
        assert "\n" not in str(info.value)


def test_cat_and_stack_constraints_match_torch() -> None:
    """constraints.cat and constraints.stack check each block against its own constraint, as torch's do."""
    value = np.array([[0.5, -1.0, 2.0, 0.3], [-0.5, 1.0, 0.2, 1.5], [1.0, 2.0, 0.9, 0.0]])
    builds = [
        lambda C: C.cat([C.positive, C.real, C.unit_interval], dim=-1, lengths=[1, 2, 1]),
        lambda C: C.cat([C.independent(C.positive, 1), C.independent(C.real, 1)], dim=0, lengths=[1, 2]),
        lambda C: C.stack([C.positive, C.real, C.unit_interval, C.nonnegative], dim=-1),
        lambda C: C.stack([C.real_vector, C.independent(C.positive, 1), C.real_vector], dim=0),
        lambda C: C.stack([C.positive, C.positive, C.positive], dim=-2),
    ]
    for build in builds:
        ce, ct = build(ed.constraints), build(td.constraints)
        np.testing.assert_array_equal(ce.check(em.tensor(value)).numpy(), ct.check(torch.tensor(value)).numpy())
        assert ce.event_dim == ct.event_dim and ce.is_discrete == ct.is_discrete and repr(ce) == repr(ct)


@pytest.mark.parametrize("diag", [0, -1, -2, 1])
def test_tril_vector_helpers_match_torch(diag) -> None:
    """tril_matrix_to_vec and vec_to_tril_matrix give torch.distributions.utils' values and gradients."""
    mat = R.standard_normal((2, 4, 4))
    me, mt = em.tensor(mat, requires_grad=True), torch.tensor(mat, requires_grad=True)
    ve, vt = edd.tril_matrix_to_vec(me, diag), tdu.tril_matrix_to_vec(mt, diag)
    np.testing.assert_array_equal(ve.detach().numpy(), vt.detach().numpy())
    w = R.standard_normal(tuple(vt.shape))
    (ge,) = em.autograd.grad((ve * em.tensor(w)).sum(), [me])
    (gt,) = torch.autograd.grad((vt * torch.tensor(w)).sum(), [mt])
    np.testing.assert_array_equal(ge.numpy(), gt.numpy())
    vec = R.standard_normal((3, vt.shape[-1]))
    ve2, vt2 = em.tensor(vec, requires_grad=True), torch.tensor(vec, requires_grad=True)
    be, bt = edd.vec_to_tril_matrix(ve2, diag), tdu.vec_to_tril_matrix(vt2, diag)
    np.testing.assert_array_equal(be.detach().numpy(), bt.detach().numpy())
    w = R.standard_normal(tuple(bt.shape))
    (ge,) = em.autograd.grad((be * em.tensor(w)).sum(), [ve2])
    (gt,) = torch.autograd.grad((bt * torch.tensor(w)).sum(), [vt2])
    np.testing.assert_array_equal(ge.numpy(), gt.numpy())
    with pytest.raises(ValueError):
        tdu.vec_to_tril_matrix(torch.zeros(5), -1)
    with pytest.raises(ValueError, match="cannot be expressed"):
        edd.vec_to_tril_matrix(em.zeros(5), -1)
    with pytest.raises(ValueError, match="outside"):
        edd.tril_matrix_to_vec(em.zeros(3, 3), 3)
