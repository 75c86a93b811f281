"""biject_to and transform_to against torch.distributions.constraint_registry: the same transform for every
constraint Ember has (or NotImplementedError where torch has none), the same values and log-Jacobians, outputs
inside the constraint in float64 and float32, biject_to's inverse undoing it, and ConstraintRegistry.register."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as td

import ember as em
import ember.distributions as ed

R = np.random.default_rng(5)
LOW, HIGH = np.array([0.0, 1.0, -1.0]), np.array([1.0, 3.0, 0.5])

# (name, build(constraints module, T), the shape of a constrained value)
CONSTRAINTS = [
    ("real", lambda C, T: C.real, (4, 3)),
    ("real_vector", lambda C, T: C.real_vector, (4, 3)),
    ("positive", lambda C, T: C.positive, (4, 3)),
    ("nonnegative", lambda C, T: C.nonnegative, (4, 3)),
    ("greater_than", lambda C, T: C.greater_than(2.5), (4, 3)),
    ("greater_than_tensor", lambda C, T: C.greater_than(T(LOW)), (4, 3)),
    ("greater_than_eq", lambda C, T: C.greater_than_eq(-1.0), (4, 3)),
    ("less_than", lambda C, T: C.less_than(3.0), (4, 3)),
    ("unit_interval", lambda C, T: C.unit_interval, (4, 3)),
    ("interval", lambda C, T: C.interval(-2.0, 5.0), (4, 3)),
    ("interval_tensor", lambda C, T: C.interval(T(LOW), T(HIGH)), (4, 3)),
    ("half_open_interval", lambda C, T: C.half_open_interval(0.0, 2.0), (4, 3)),
    ("simplex", lambda C, T: C.simplex, (5, 4)),
    ("independent_positive", lambda C, T: C.independent(C.positive, 1), (4, 3)),
    ("independent_interval", lambda C, T: C.independent(C.interval(-1.0, 1.0), 2), (2, 4, 3)),
    ("independent_simplex", lambda C, T: C.independent(C.simplex, 1), (2, 3, 4)),
    ("lower_cholesky", lambda C, T: C.lower_cholesky, (2, 3, 3)),
    ("positive_definite", lambda C, T: C.positive_definite, (2, 3, 3)),
    ("positive_semidefinite", lambda C, T: C.positive_semidefinite, (2, 3, 3)),
    ("corr_cholesky", lambda C, T: C.corr_cholesky, (2, 4, 4)),
    ("cat", lambda C, T: C.cat([C.positive, C.real, C.unit_interval], dim=-1, lengths=[1, 2, 1]), (3, 4)),
    ("cat_batch_dim", lambda C, T: C.cat([C.greater_than(1.0), C.less_than(0.0)], dim=0, lengths=[2, 1]), (3, 4)),
    ("stack", lambda C, T: C.stack([C.positive, C.unit_interval, C.real], dim=-1), (4, 3)),
    ("lower_triangular", lambda C, T: C.lower_triangular, (2, 3, 3)),
    ("boolean", lambda C, T: C.boolean, (4,)),
]
_REGISTRIES = {"biject_to": (ed.biject_to, td.biject_to), "transform_to": (ed.transform_to, td.transform_to)}


def _T(lib, dtype="float64"):  # noqa: N802
    if lib is ed:
        return lambda a: em.tensor(a, dtype=getattr(em, dtype))
    return lambda a: torch.tensor(a, dtype=getattr(torch, dtype))


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize("registry", list(_REGISTRIES))
@pytest.mark.parametrize(("name", "build", "shape"), CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_registry_matches_torch(name, build, shape, registry) -> None:
    """The same transform as torch's (class, repr, bijective, shapes), the same values and log-Jacobians and
    their gradients, the output inside the constraint, and for biject_to the inverse back to the input."""
    reg_e, reg_t = _REGISTRIES[registry]
    ce, ct = build(ed.constraints, _T(ed)), build(td.constraints, _T(td))
    try:
        tt = reg_t(ct)
    except NotImplementedError as exc:
        with pytest.raises(NotImplementedError) as info:
            reg_e(ce)
        assert str(info.value) == str(exc)
        return
    te = reg_e(ce)
    assert type(te).__name__ == type(tt).__name__ and repr(te) == repr(tt), name
    assert te.bijective == tt.bijective
    in_shape = te.inverse_shape(shape)
    assert in_shape == tuple(tt.inverse_shape(torch.Size(shape)))
    u = np.random.default_rng(sum(map(ord, name))).standard_normal(in_shape) * 2
    ue, ut = em.tensor(u, requires_grad=True), torch.tensor(u, requires_grad=True)
    ye, yt = te(ue), tt(ut)
    assert tuple(ye.shape) == tuple(yt.shape) == shape
    np.testing.assert_allclose(_np(ye), _np(yt), rtol=1e-10, atol=1e-12, err_msg=name)
    assert bool(ce.check(ye).all()) and bool(ct.check(yt).all()), name
    try:
        jt = tt.log_abs_det_jacobian(ut, yt)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            te.log_abs_det_jacobian(ue, ye)
    else:
        je = te.log_abs_det_jacobian(ue, ye)
        np.testing.assert_allclose(_np(je), _np(jt), rtol=1e-10, atol=1e-12, err_msg=f"{name}: log|det J|")
        if jt.requires_grad:
            w = R.standard_normal(tuple(jt.shape))
            (ge,) = em.autograd.grad((je * em.tensor(w)).sum(), [ue])
            (gt,) = torch.autograd.grad((jt * torch.tensor(w)).sum(), [ut])
            np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-9, atol=1e-11)
    if registry == "biject_to":
        np.testing.assert_allclose(te.inv(em.tensor(_np(ye))).numpy(), u, rtol=1e-8, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("registry", list(_REGISTRIES))
@pytest.mark.parametrize(("name", "build", "shape"), CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_lands_in_constraint_float32(name, build, shape, registry) -> None:
    """In float32, and from larger unconstrained values too, the transform's output satisfies the constraint."""
    reg_e = _REGISTRIES[registry][0]
    ce = build(ed.constraints, _T(ed, "float32"))
    try:
        te = reg_e(ce)
    except NotImplementedError:
        return
    rng = np.random.default_rng(sum(map(ord, name)))
    # matrices stay at scale 1: exp of a larger diagonal makes L L^T too ill-conditioned for a float32 Cholesky
    for scale in (1.0, 3.0) if ce.event_dim < 2 else (1.0,):
        u = em.tensor(rng.standard_normal(te.inverse_shape(shape)) * scale, dtype=em.float32)
        y = te(u)
        assert y.dtype == em.float32 and tuple(y.shape) == shape
        assert bool(ce.check(y).all()), (name, scale)


def test_registry_register_and_errors() -> None:
    """register by class or instance, as a decorator or a call; TypeError for anything else; NotImplementedError
    naming the constraint class for one with no transform."""
    reg = ed.constraint_registry.ConstraintRegistry()

    class _Odd(ed.constraints.Constraint):
        def check(self, value):
            return value % 2 == 1

    @reg.register(_Odd)
    def _to_odd(constraint):
        return ed.AffineTransform(1.0, 2.0)

    assert isinstance(reg(_Odd()), ed.AffineTransform)
    assert reg.register(ed.constraints.positive, lambda c: ed.ExpTransform()) is not None
    assert isinstance(reg(ed.constraints.greater_than(3.0)), ed.ExpTransform)  # one class, every instance
    for bad in ("positive", 3, int):
        with pytest.raises(TypeError):
            td.constraint_registry.ConstraintRegistry().register(bad, lambda c: None)
        with pytest.raises(TypeError, match="Constraint subclass or instance"):
            reg.register(bad, lambda c: None)
    with pytest.raises(NotImplementedError) as t_info:
        td.biject_to(td.constraints.dependent)
    with pytest.raises(NotImplementedError) as e_info:
        ed.biject_to(ed.constraints.dependent)
    assert str(e_info.value) == str(t_info.value)
    with pytest.raises(NotImplementedError, match="Cannot transform _Odd constraints"):
        ed.transform_to(_Odd())
    assert ed.biject_to is ed.constraint_registry.biject_to and ed.transform_to is ed.constraint_registry.transform_to


def test_parameter_round_trip_through_transform_to() -> None:
    """A distribution's parameter optimised in unconstrained space: transform_to(arg_constraints[name]) maps a free
    tensor onto valid parameters, and its gradient matches torch's."""
    u = R.standard_normal(3)
    ue, ut = em.tensor(u, requires_grad=True), torch.tensor(u, requires_grad=True)
    scale_e = ed.transform_to(ed.Normal.arg_constraints["scale"])(ue)
    scale_t = td.transform_to(td.Normal.arg_constraints["scale"])(ut)
    x = R.standard_normal(3)
    le = ed.Normal(em.zeros(3, dtype=em.float64), scale_e).log_prob(em.tensor(x)).sum()
    lt = td.Normal(torch.zeros(3, dtype=torch.float64), scale_t).log_prob(torch.tensor(x)).sum()
    (ge,), (gt,) = em.autograd.grad(le, [ue]), torch.autograd.grad(lt, [ut])
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-12)
    conc = ed.biject_to(ed.Dirichlet.arg_constraints["concentration"])(em.tensor(R.standard_normal((2, 4))))
    ed.Dirichlet(conc)  # validated: the output satisfies the constraint it came from
