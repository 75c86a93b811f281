"""ember.linalg's functions that filled torch.linalg's gaps (LU family, *_ex, cond, matrix_rank, matrix_exp, ...)
against PyTorch beyond the op table: the namespace, edge cases (singular, 0x0, 1x1, empty batches), info and
check_errors, bad inputs, gradients of partial outputs, and finite differences where PyTorch has no derivative."""

import math

import numpy as np
import pytest
import torch

import ember as em

RNG = np.random.default_rng(0)
INF = math.inf
FLOATS = ("float32", "float64")
TOL = {"float32": 2e-5, "float64": 1e-11}


def well_conditioned(shape, dtype="float64"):
    """Random square matrices plus n on the diagonal (batched by shape[:-2])."""
    n = shape[-1]
    return (RNG.standard_normal(shape) + n * np.eye(n)).astype(dtype)


def spd(shape, dtype="float64"):
    """Random symmetric positive-definite matrices."""
    a = RNG.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + np.eye(shape[-1])).astype(dtype)


def both(fn, *arrays):
    """fn(ember, *tensors) and fn(torch, *tensors) on the same arrays."""
    return fn(em, *[em.tensor(a) for a in arrays]), fn(torch, *[torch.tensor(a) for a in arrays])


def as_list(out):
    """A result as a flat list of tensors."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in as_list(o)]
    return [out]


def assert_matches(e_out, t_out, tol=1e-11):
    """Same structure, shapes, dtypes and values (NaN where PyTorch has NaN, infinities of the same sign)."""
    e_out, t_out = as_list(e_out), as_list(t_out)
    assert len(e_out) == len(t_out)
    for e, t in zip(e_out, t_out):
        assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
        assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
        np.testing.assert_allclose(e.numpy(), t.detach().numpy(), rtol=tol, atol=tol, equal_nan=True)


# --- the namespace ------------------------------------------------------------------------------------------------
SKIPPED = {"eig", "eigvals", "ldl_factor", "ldl_factor_ex", "ldl_solve"}  # complex results; LDL not planned


def test_every_torch_linalg_function_is_there_but_the_complex_and_ldl_ones():
    public = {n for n in dir(torch.linalg) if not n.startswith("_") and callable(getattr(torch.linalg, n))}
    assert sorted(public - SKIPPED - set(dir(em.linalg))) == []


def test_all_lists_exactly_the_public_names():
    names = {n for n in dir(em.linalg) if not n.startswith("_")}
    assert set(em.linalg.__all__) == names
    assert len(em.linalg.__all__) == len(set(em.linalg.__all__))
    for helper in ("annotations", "fmt_shape", "with_zero_gradient_to", "eye_like", "ShapeError"):
        assert helper not in names
    for name in em.linalg.__all__:
        assert hasattr(torch.linalg, name) or name.endswith("Result"), name


@pytest.mark.parametrize(("call", "fields"), [
    (lambda L, a: L.linalg.lu(a), ("P", "L", "U")),
    (lambda L, a: L.linalg.lu_factor(a), ("LU", "pivots")),
    (lambda L, a: L.linalg.lu_factor_ex(a), ("LU", "pivots", "info")),
    (lambda L, a: L.linalg.inv_ex(a), ("inverse", "info")),
    (lambda L, a: L.linalg.solve_ex(a, a), ("result", "info")),
    (lambda L, a: L.linalg.cholesky_ex(a), ("L", "info")),
])
def test_results_are_named_as_pytorch_names_them(call, fields):
    e, t = both(call, spd((3, 3)))
    for k, name in enumerate(fields):
        assert_matches(getattr(e, name), getattr(t, name))
        assert getattr(e, name) is e[k]


# --- values at the edges, float32 and float64 -------------------------------------------------------------------------
SQUARE_SHAPES = [(1, 1), (0, 0), (2, 0, 0), (0, 3, 3), (4, 4), (2, 1, 3, 3)]
RECT_SHAPES = [(0, 3), (3, 0), (1, 4), (4, 1), (2, 5, 3), (2, 3, 5), (0, 2, 4)]

SQUARE_FUNCTIONS = {
    "lu_factor_ex": lambda L, a: tuple(L.linalg.lu_factor_ex(a)),
    "lu_factor": lambda L, a: tuple(L.linalg.lu_factor(a)),
    "lu": lambda L, a: tuple(L.linalg.lu(a)),
    "inv_ex": lambda L, a: tuple(L.linalg.inv_ex(a)),
    "solve_ex": lambda L, a: tuple(L.linalg.solve_ex(a, a.sum(-1))),
    "solve_ex_left_false": lambda L, a: tuple(L.linalg.solve_ex(a, a, left=False)),
    "lu_solve": lambda L, a: L.linalg.lu_solve(*L.linalg.lu_factor(a), a.mT),
    "lu_solve_adjoint_right": lambda L, a: L.linalg.lu_solve(*L.linalg.lu_factor(a), a, left=False, adjoint=True),
    "solve_triangular": lambda L, a: L.linalg.solve_triangular(a, a.mT, upper=True),
    "solve_triangular_right_unit": lambda L, a: L.linalg.solve_triangular(a, a, upper=False, left=False,
                                                                           unitriangular=True),
    "cholesky_ex": lambda L, a: tuple(L.linalg.cholesky_ex(a @ a.mT + L.eye(a.shape[-1], dtype=a.dtype))),
    "matrix_exp": lambda L, a: L.linalg.matrix_exp(a * 0.3),
    "cond": lambda L, a: L.linalg.cond(a),
    "cond_1": lambda L, a: L.linalg.cond(a, 1),
    "cond_fro": lambda L, a: L.linalg.cond(a, "fro"),
    "cond_nuc": lambda L, a: L.linalg.cond(a, "nuc"),
    "matrix_rank": lambda L, a: L.linalg.matrix_rank(a),
    "matrix_rank_hermitian": lambda L, a: L.linalg.matrix_rank(a + a.mT, hermitian=True),
    "diagonal": lambda L, a: L.linalg.diagonal(a, offset=-1),
    "vander": lambda L, a: L.linalg.vander(a.sum(-1), N=3),
    "householder_product": lambda L, a: L.linalg.householder_product(a, a.sum(-2)[..., :-1] * 0.1),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(SQUARE_FUNCTIONS))
def test_square_edge_shapes_match_torch(name, shape, dtype):
    e, t = both(SQUARE_FUNCTIONS[name], well_conditioned(shape, dtype))
    assert_matches(e, t, TOL[dtype] * (10 if name.startswith("cond") else 1))


RECT_FUNCTIONS = {
    "lu_factor_ex": lambda L, a: tuple(L.linalg.lu_factor_ex(a)),
    "lu": lambda L, a: tuple(L.linalg.lu(a)),
    "cond": lambda L, a: L.linalg.cond(a, -2),
    "matrix_rank": lambda L, a: L.linalg.matrix_rank(a),
    "diagonal": lambda L, a: L.linalg.diagonal(a, offset=1),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", RECT_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(RECT_FUNCTIONS))
def test_rectangular_edge_shapes_match_torch(name, shape, dtype):
    e, t = both(RECT_FUNCTIONS[name], RNG.standard_normal(shape).astype(dtype))
    assert_matches(e, t, TOL[dtype])


def test_householder_product_of_a_qr_factorisation_is_its_q():
    a = RNG.standard_normal((2, 6, 4))
    t_a, t_tau = torch.geqrf(torch.tensor(a))
    e = em.linalg.householder_product(em.tensor(t_a.numpy()), em.tensor(t_tau.numpy()))
    assert_matches(e, torch.linalg.householder_product(t_a, t_tau))
    q = e.numpy()
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (2, 4, 4)), atol=1e-12)
    np.testing.assert_allclose(q @ np.triu(t_a.numpy()[:, :4]), a, atol=1e-12)  # Q R = A


# --- singular matrices: info, inf and NaN as PyTorch's -----------------------------------------------------------------
SINGULAR = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[2.0, 1.0], [1.0, 3.0]]])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("call", [
    lambda L, a: tuple(L.linalg.lu_factor_ex(a)),
    lambda L, a: tuple(L.linalg.lu(a)),
    lambda L, a: tuple(L.linalg.inv_ex(a)),
    lambda L, a: tuple(L.linalg.solve_ex(a, a[..., 1])),
    lambda L, a: L.linalg.lu_solve(*L.linalg.lu_factor_ex(a)[:2], a),
    lambda L, a: L.linalg.solve_triangular(a, a, upper=False),
    lambda L, a: L.linalg.cond(a, 1),
    lambda L, a: L.linalg.cond(a, INF),
    lambda L, a: L.linalg.cond(a, "fro"),
    lambda L, a: L.linalg.matrix_rank(a),
], ids=["lu_factor_ex", "lu", "inv_ex", "solve_ex", "lu_solve", "solve_triangular", "cond_1", "cond_inf", "cond_fro",
        "matrix_rank"])
def test_singular_matrices_give_pytorchs_info_inf_and_nan(call, dtype):
    e, t = both(call, SINGULAR.astype(dtype))
    assert_matches(e, t, TOL[dtype])


def test_the_2_norm_condition_number_of_zero_is_nan_and_the_1_norm_one_is_inf():
    assert_matches(*both(lambda L, a: (L.linalg.cond(a), L.linalg.cond(a, 1), L.linalg.cond(a, -INF)), np.zeros((2, 2))))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_reports_the_first_leading_minor_that_is_not_positive_definite(upper):
    a = np.array([[[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                  [[4.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]],
                  [[4.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 1.0]]])
    e, t = both(lambda L, x: tuple(L.linalg.cholesky_ex(x, upper=upper)), a)
    assert e[1].tolist() == t[1].tolist() == [2, 3, 0]
    assert_matches(e, t)  # the partial factor too (LAPACK's unblocked potf2 on matrices this small)


def test_cholesky_upper_reads_the_upper_triangle_as_pytorch():
    a = np.array([[4.0, 7.0], [1.0, 2.0]])  # not symmetric: lower (4, 1, 2) is definite, upper (4, 7, 2) is not
    assert_matches(*both(lambda L, x: (tuple(L.linalg.cholesky_ex(x, upper=True)), tuple(L.linalg.cholesky_ex(x))), a))


def test_matrix_exp_of_infinities_and_overflow():
    assert_matches(*both(lambda L, a: L.linalg.matrix_exp(a), np.array([[INF, 0.0], [0.0, 1.0]], np.float32)))
    e, t = both(lambda L, a: L.linalg.matrix_exp(a), np.array([[100.0, 0.0], [0.0, 1.0]], np.float32))
    assert_matches(e, t, tol=3e-5)  # beyond float32's range: inf, and zeros beside it (not NaN)
    assert e[1, 1].item() == np.float32(math.e)  # computed in float64 and rounded once (PyTorch's is 1e-5 off)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
def test_matrix_exp_matches_torch_across_scales(scale):
    a = RNG.standard_normal((3, 4, 4)) * scale
    e, t = both(lambda L, x: L.linalg.matrix_exp(x), a)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-11, atol=1e-11 * np.abs(t.numpy()).max())


def test_matrix_rank_tolerances_as_pytorch():
    a = np.stack([np.diag([3.0, 1.0, 1e-3]), np.diag([1.0, 0.5, 0.2])])
    for kw in [{}, {"atol": 0.1}, {"rtol": 0.4}, {"atol": 0.6, "rtol": 0.1}, {"atol": 0.0}, {"atol": -1.0}]:
        assert_matches(*both(lambda L, x: L.linalg.matrix_rank(x, **kw), a))
    assert_matches(*both(lambda L, x: L.linalg.matrix_rank(x, 0.3), a))  # NumPy's positional tol
    assert_matches(*both(lambda L, x: L.linalg.matrix_rank(x, atol=L.tensor([0.1, 0.6])), a))
    assert_matches(*both(lambda L, x: L.linalg.matrix_rank(x, rtol=L.tensor([0.5, 0.1])), a))


def test_vander_keeps_integers_exact_as_pytorch():
    for dtype in ("int32", "int64", "uint8"):
        assert_matches(*both(lambda L, x: L.linalg.vander(x, N=5), np.array([[0, 1, 2], [3, 1, 4]], dtype)), tol=0)
    assert_matches(*both(lambda L, x: L.linalg.vander(x, N=3), np.array(2.5)))  # a 0-d x is one point


# --- check_errors ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "message"), [
    (lambda L, a: L.linalg.lu_factor(a), r"linalg.lu_factor: \(Batch element 1\): U\[1,1\] is zero"),
    (lambda L, a: L.linalg.lu_factor_ex(a, check_errors=True), r"linalg.lu_factor_ex: \(Batch element 1\): U\[1,1\]"),
    (lambda L, a: L.linalg.inv_ex(a, check_errors=True), r"linalg.inv_ex: \(Batch element 1\): the diagonal element 1"),
    (lambda L, a: L.linalg.solve_ex(a, a, check_errors=True), r"linalg.solve_ex: \(Batch element 1\): .*singular"),
    (lambda L, a: L.linalg.cholesky_ex(a, check_errors=True),
     r"linalg.cholesky_ex: \(Batch element 1\): .*leading minor of order 1 is not positive-definite"),
    (lambda L, a: L.linalg.tensorinv(a[1], ind=1), "linalg.tensorinv: .* singular"),
    (lambda L, a: L.linalg.tensorsolve(a[1], a[1, 0]), "linalg.tensorsolve: .* singular"),
])
def test_check_errors_raise_linalg_errors_naming_the_batch_element(call, message):
    a = np.stack([np.eye(2), np.zeros((2, 2))])
    with pytest.raises(em.linalg.LinAlgError, match=message) as e_info:
        call(em, em.tensor(a))
    with pytest.raises(RuntimeError) as t_info:
        call(torch, torch.tensor(a))
    assert isinstance(e_info.value, RuntimeError) and isinstance(t_info.value, RuntimeError)


def test_without_check_errors_nothing_is_raised_and_info_says_which_failed():
    a = em.tensor(np.stack([np.eye(2), np.zeros((2, 2)), -np.eye(2)]))
    assert em.linalg.lu_factor_ex(a).info.tolist() == [0, 1, 0]
    assert em.linalg.inv_ex(a).info.tolist() == [0, 1, 0]
    assert em.linalg.solve_ex(a, a).info.tolist() == [0, 1, 0]
    assert em.linalg.cholesky_ex(a).info.tolist() == [0, 1, 1]


def test_check_errors_on_meta_has_no_values_to_check():
    a = em.zeros(3, 2, 2, device="meta")
    out = em.linalg.lu_factor_ex(a, check_errors=True)
    assert [tuple(t.shape) for t in out] == [(3, 2, 2), (3, 2), (3,)] and out.info.dtype is em.int32
    assert em.linalg.matrix_rank(a).dtype is em.int64


# --- bad inputs -----------------------------------------------------------------------------------------------------
# (call, Ember's class, message). Where PyTorch raises RuntimeError for a shape, Ember raises its ShapeError (a
# ValueError), as everywhere else (docs/errors.md); every other class is (a subclass of) the one PyTorch raises.
BAD = [
    ("st_nonsquare", lambda L: L.linalg.solve_triangular(L.ones(2, 3), L.ones(2, 1), upper=False), em.ShapeError,
     r"linalg.solve_triangular: A must be batches of square matrices, but they are 2 by 3"),
    ("st_vector_b", lambda L: L.linalg.solve_triangular(L.eye(2), L.ones(2), upper=False), em.ShapeError,
     r"linalg.solve_triangular: B must have at least 2 dimensions, got shape \(2,\)"),
    ("st_rows", lambda L: L.linalg.solve_triangular(L.eye(2), L.ones(3, 1), upper=False), em.ShapeError,
     r"linalg.solve_triangular: incompatible shapes of A \(2, 2\) and B \(3, 1\) for the equation AX = B"),
    ("st_right", lambda L: L.linalg.solve_triangular(L.eye(2), L.ones(2, 3), upper=False, left=False), em.ShapeError,
     r"for the equation XA = B"),
    ("st_batch", lambda L: L.linalg.solve_triangular(L.ones(3, 2, 2), L.ones(4, 2, 1), upper=False), em.ShapeError,
     r"linalg.solve_triangular: shapes \(3,\) and \(4,\) cannot be broadcast"),
    ("st_int", lambda L: L.linalg.solve_triangular(L.eye(2, dtype=L.int64), L.ones(2, 1, dtype=L.int64), upper=True),
     em.errors.DtypeError, "linalg.solve_triangular: expected a floating point tensor as input, got int64"),
    ("lu_vector", lambda L: L.linalg.lu(L.ones(3)), em.ShapeError, r"linalg.lu: A must have at least 2 dimensions"),
    ("lu_int", lambda L: L.linalg.lu_factor(L.ones(3, 3, dtype=L.int64)), em.errors.DtypeError,
     "linalg.lu_factor: expected a floating point tensor as input, got int64"),
    ("lu_no_pivot", lambda L: L.linalg.lu(L.eye(2), pivot=False), NotImplementedError,
     "linalg.lu: LU without pivoting is not implemented"),
    ("lu_solve_rect", lambda L: L.linalg.lu_solve(L.ones(3, 4), L.ones(3, dtype=L.int32), L.ones(3, 1)),
     em.ShapeError, "linalg.lu_solve: LU must be batches of square matrices"),
    ("lu_solve_vector_b", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(3)), em.ShapeError,
     "linalg.lu_solve: B must have at least 2 dimensions"),
    ("lu_solve_rows", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(4, 1)), em.ShapeError,
     r"linalg.lu_solve: incompatible shapes of LU \(3, 3\) and B \(4, 1\)"),
    ("lu_solve_pivots_int64", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int64), L.ones(3, 1)),
     em.errors.DtypeError, "linalg.lu_solve: pivots must be int32"),
    ("lu_solve_pivots_shape", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(2, dtype=L.int32), L.ones(3, 1)),
     em.ShapeError, r"linalg.lu_solve: pivots must have shape \(3,\)"),
    ("lu_solve_pivots_range", lambda L: L.linalg.lu_solve(L.eye(3), L.tensor([5, 2, 3], dtype=L.int32), L.ones(3, 1)),
     em.errors.IndexOutOfBoundsError, r"linalg.lu_solve: pivots must lie in \[1, 3\]"),
    ("solve_ex_nonsquare", lambda L: L.linalg.solve_ex(L.ones(2, 3), L.ones(2)), em.ShapeError,
     "linalg.solve_ex: A must be batches of square matrices"),
    ("solve_ex_rows", lambda L: L.linalg.solve_ex(L.eye(3), L.ones(2, 2)), em.ShapeError,
     r"linalg.solve_ex: incompatible shapes of A \(3, 3\) and B \(2, 2\)"),
    ("solve_ex_int", lambda L: L.linalg.solve_ex(L.ones(2, 2, dtype=L.int64), L.ones(2, dtype=L.int64)),
     em.errors.DtypeError, "linalg.solve_ex: expected a floating point tensor"),
    ("solve_ex_mixed", lambda L: L.linalg.solve_ex(L.eye(2), L.ones(2, dtype=L.float64)), em.errors.DtypeError,
     r"linalg.solve_ex: expected operands of one dtype, got A float32 \(2, 2\), B float64 \(2,\)"),
    ("inv_ex_nonsquare", lambda L: L.linalg.inv_ex(L.ones(2, 3)), em.ShapeError, "linalg.inv_ex: A must be batches"),
    ("cholesky_ex_int", lambda L: L.linalg.cholesky_ex(L.ones(2, 2, dtype=L.int64)), em.errors.DtypeError,
     "linalg.cholesky_ex: expected a floating point tensor"),
    ("cholesky_ex_nonsquare", lambda L: L.linalg.cholesky_ex(L.ones(2, 3)), em.ShapeError,
     "linalg.cholesky_ex: A must be batches of square matrices"),
    ("cond_vector", lambda L: L.linalg.cond(L.ones(2)), em.ShapeError, r"linalg.cond: A must have at least 2"),
    ("cond_p", lambda L: L.linalg.cond(L.eye(2), 3), em.errors.DomainError, "linalg.cond: p must be None, 2, .* got 3"),
    ("cond_p_str", lambda L: L.linalg.cond(L.eye(2), "foo"), em.errors.DomainError, "linalg.cond: p must be .*'foo'"),
    ("cond_rect_1", lambda L: L.linalg.cond(L.ones(2, 3), 1), em.ShapeError,
     r"linalg.cond\(p=1\): A must be batches of square matrices, but they are 2 by 3"),
    ("cond_int", lambda L: L.linalg.cond(L.eye(2, dtype=L.int64)), em.errors.DtypeError, "linalg.cond: expected"),
    ("matrix_rank_vector", lambda L: L.linalg.matrix_rank(L.ones(2)), em.ShapeError, "linalg.matrix_rank: A must"),
    ("matrix_rank_int", lambda L: L.linalg.matrix_rank(L.ones(2, 2, dtype=L.int64)), em.errors.DtypeError,
     "linalg.matrix_rank: expected a floating point tensor"),
    ("matrix_rank_hermitian_rect", lambda L: L.linalg.matrix_rank(L.ones(2, 3), hermitian=True), em.ShapeError,
     r"linalg.matrix_rank\(hermitian=True\): A must be batches of square matrices"),
    ("matrix_rank_tol_and_atol", lambda L: L.linalg.matrix_rank(L.ones(2, 2), 0.5, atol=0.1), TypeError,
     "linalg.matrix_rank: give tol or atol/rtol, not both"),
    ("diagonal_vector", lambda L: L.linalg.diagonal(L.ones(3)), IndexError,
     "linalg.diagonal: dimension -2 is out of range for a tensor of 1 dimension"),
    ("diagonal_same_dims", lambda L: L.linalg.diagonal(L.ones(3, 3), dim1=0, dim2=0), em.errors.DomainError,
     "linalg.diagonal: dim1 and dim2 must be different"),
    ("vander_n", lambda L: L.linalg.vander(L.ones(3), N=1), em.errors.DomainError,
     "linalg.vander: N must be an integer greater than 1, got 1"),
    ("vander_empty", lambda L: L.linalg.vander(L.ones(0)), em.errors.DomainError, "linalg.vander: N must be"),
    ("vander_bool", lambda L: L.linalg.vander(L.ones(3, dtype=L.bool)), em.errors.DtypeError,
     "linalg.vander: x must be float32, float64 or an integer tensor .* got bool"),
    ("vander_half", lambda L: L.linalg.vander(L.ones(3, dtype=L.float16)), em.errors.DtypeError, "got float16"),
    ("tensorinv_ind", lambda L: L.linalg.tensorinv(L.ones(2, 2), ind=0), em.errors.DomainError,
     "linalg.tensorinv: ind must be a positive integer, got 0"),
    ("tensorinv_shape", lambda L: L.linalg.tensorinv(L.ones(2, 3, 4), ind=1), em.ShapeError,
     r"linalg.tensorinv: A of shape \(2, 3, 4\) needs prod\(A.shape\[ind:\]\) == prod\(A.shape\[:ind\]\)"),
    ("tensorinv_int", lambda L: L.linalg.tensorinv(L.ones(2, 2, dtype=L.int64), ind=1), em.errors.DtypeError,
     "linalg.tensorinv: expected a floating point tensor"),
    ("tensorsolve_shape", lambda L: L.linalg.tensorsolve(L.ones(2, 3, 4), L.ones(2)), em.ShapeError,
     r"linalg.tensorsolve: A \(2, 3, 4\) does not make a square system with B \(2,\)"),
    ("tensorsolve_b_too_big", lambda L: L.linalg.tensorsolve(L.eye(2), L.ones(2, 2, 2)), em.ShapeError,
     r"linalg.tensorsolve: B \(2, 2, 2\) has more dimensions than A \(2, 2\)"),
    ("tensorsolve_mixed", lambda L: L.linalg.tensorsolve(L.eye(2), L.ones(2, dtype=L.float64)), em.errors.DtypeError,
     "linalg.tensorsolve: expected operands of one dtype"),
    ("tensorsolve_dims", lambda L: L.linalg.tensorsolve(L.eye(2), L.ones(2), dims=(5,)), IndexError,
     "linalg.tensorsolve: dimension 5 is out of range"),
    ("matrix_exp_int", lambda L: L.linalg.matrix_exp(L.ones(2, 2, dtype=L.int64)), em.errors.DtypeError,
     "linalg.matrix_exp: expected a floating point tensor"),
    ("matrix_exp_rect", lambda L: L.linalg.matrix_exp(L.ones(2, 3)), em.ShapeError,
     "linalg.matrix_exp: A must be batches of square matrices"),
    ("householder_wide", lambda L: L.linalg.householder_product(L.ones(3, 4), L.ones(2)), em.ShapeError,
     r"linalg.householder_product: A \(3, 4\) needs at least as many rows as columns"),
    ("householder_tau", lambda L: L.linalg.householder_product(L.ones(2, 4, 3), L.ones(3, 2)), em.ShapeError,
     r"linalg.householder_product: tau \(3, 2\) must have A's batch dims \(2,\)"),
    ("householder_mixed", lambda L: L.linalg.householder_product(L.ones(4, 3), L.ones(2, dtype=L.float64)),
     em.errors.DtypeError, "linalg.householder_product: expected operands of one dtype"),
]


@pytest.mark.parametrize(("call", "error", "message"), [pytest.param(c, e, m, id=i) for i, c, e, m in BAD])
def test_bad_inputs_raise_one_line_errors_naming_the_op(call, error, message):
    with pytest.raises(error, match=message) as e_info:
        call(em)
    assert "\n" not in str(e_info.value)
    with pytest.raises(Exception) as t_info:  # noqa: PT011 - PyTorch refuses it too; its class is compared below
        call(torch)
    if error is not em.ShapeError:
        builtin = next(c for c in type(t_info.value).__mro__ if c.__module__ == "builtins")
        assert isinstance(e_info.value, builtin), (type(e_info.value), builtin)


def test_solve_triangular_needs_upper_as_pytorch():
    with pytest.raises(TypeError, match="upper"):
        em.linalg.solve_triangular(em.eye(2), em.ones(2, 1))


# --- gradients ------------------------------------------------------------------------------------------------------
def grads_match(fn, *arrays, tol=1e-9):
    """Input gradients of fn's differentiable outputs for one random upstream gradient, in Ember and PyTorch."""
    xe = [em.tensor(a, requires_grad=True) for a in arrays]
    xt = [torch.tensor(a, requires_grad=True) for a in arrays]
    oe = [o for o in as_list(fn(em, *xe)) if o.requires_grad]
    ot = [o for o in as_list(fn(torch, *xt)) if o.requires_grad]
    assert len(oe) == len(ot)
    ups = [RNG.standard_normal(tuple(o.shape)) for o in ot]
    ge = em.autograd.grad(oe, xe, [em.tensor(u) for u in ups], allow_unused=True)
    gt = torch.autograd.grad(ot, xt, [torch.tensor(u) for u in ups], allow_unused=True)
    for a, b, x in zip(ge, gt, arrays):
        a = np.zeros(x.shape) if a is None else a.numpy()
        b = np.zeros(x.shape) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 3), (2, 3, 5)], ids=str)
@pytest.mark.parametrize("part", ["L", "U", "LU"])
def test_lu_gradient_from_either_factor_alone(shape, part):
    a = RNG.standard_normal(shape)
    grads_match(lambda L, x: [getattr(L.linalg.lu(x), p) for p in part], a)


@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 2), (2, 6)], ids=str)
def test_lu_factor_gradient_splits_the_packed_factors_as_pytorch(shape):
    grads_match(lambda L, x: L.linalg.lu_factor_ex(x).LU, RNG.standard_normal(shape))


def test_lu_solve_gradient_reaches_a_given_lu_and_b():
    lu, piv = torch.linalg.lu_factor(torch.tensor(well_conditioned((2, 3, 3))))
    b = RNG.standard_normal((2, 3, 2))
    for left, adjoint in [(True, False), (True, True)]:
        grads_match(lambda L, f, y: L.linalg.lu_solve(f, L.tensor(piv.numpy()), y, left=left, adjoint=adjoint),
                    lu.numpy(), b)


@pytest.mark.parametrize("upper", [False, True])
def test_solve_triangular_ignores_the_other_triangle_and_gives_it_no_gradient(upper):
    a, b = well_conditioned((3, 3)), RNG.standard_normal((3, 2))
    grads_match(lambda L, x, y: L.linalg.solve_triangular(x, y, upper=upper, unitriangular=True), a, b)
    g = em.tensor(a, requires_grad=True)
    em.linalg.solve_triangular(g, em.tensor(b), upper=upper).sum().backward()
    other = np.tril(g.grad.numpy(), -1) if upper else np.triu(g.grad.numpy(), 1)
    assert not other.any()


@pytest.mark.parametrize("p", [1, -1, INF, -INF, "fro"])
def test_cond_gradient_by_finite_differences_where_pytorch_has_none(p):
    a = em.tensor(well_conditioned((2, 3, 3)), requires_grad=True)
    assert em.autograd.gradcheck(lambda x: em.linalg.cond(x, p), [a], eps=1e-6, atol=1e-6, rtol=1e-4)
    t = torch.tensor(a.detach().numpy(), requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.linalg.cond(t, p).sum().backward()


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3), (2, 3, 4)], ids=str)
def test_lu_gradient_by_finite_differences(shape):
    a = em.tensor(RNG.standard_normal(shape), requires_grad=True)
    assert em.autograd.gradcheck(lambda x: tuple(em.linalg.lu(x))[1:], [a], eps=1e-6, atol=1e-6, rtol=1e-4)


def test_matrix_exp_second_derivative_matches_torch():
    a = RNG.standard_normal((2, 3, 3))
    xe, xt = em.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    w = RNG.standard_normal(a.shape)
    (ge,) = em.autograd.grad(em.linalg.matrix_exp(xe).sum(), [xe], create_graph=True)
    (gt,) = torch.autograd.grad(torch.linalg.matrix_exp(xt).sum(), [xt], create_graph=True)
    (he,) = em.autograd.grad((ge * em.tensor(w)).sum(), [xe])
    (ht,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), [xt])
    np.testing.assert_allclose(he.numpy(), ht.numpy(), rtol=1e-9, atol=1e-9)


def test_counts_and_indices_carry_no_gradient():
    a = em.tensor(well_conditioned((2, 3, 3)), requires_grad=True)
    assert em.linalg.matrix_rank(a).dtype is em.int64 and not em.linalg.matrix_rank(a).requires_grad
    out = em.linalg.lu_factor_ex(a)
    assert out.LU.requires_grad and not out.pivots.requires_grad and not out.info.requires_grad
    assert not em.linalg.lu(a).P.requires_grad


def test_empty_batches_backpropagate_empty_gradients():
    a = em.zeros(0, 3, 3, requires_grad=True)
    (em.linalg.lu_factor(a).LU.sum() + em.linalg.matrix_exp(a).sum() + em.linalg.inv_ex(a).inverse.sum()).backward()
    assert tuple(a.grad.shape) == (0, 3, 3)


def test_householder_product_without_reflectors_is_the_identity_with_a_zero_gradient():
    a, tau = RNG.standard_normal((2, 4, 3)), np.zeros((2, 0))
    assert_matches(*both(lambda L, x, t: L.linalg.householder_product(x, t), a, tau))
    x = em.tensor(a, requires_grad=True)
    em.linalg.householder_product(x, em.tensor(tau)).sum().backward()
    assert not x.grad.numpy().any()


# --- low precision and graphs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_is_computed_in_float32_and_rounded_once(dtype):
    a = well_conditioned((3, 3), "float32")
    low = em.tensor(a, dtype=getattr(em, dtype))
    exact = low.float()
    for fn in (lambda x: em.linalg.lu_factor(x).LU, lambda x: em.linalg.matrix_exp(x * 0.1),
               lambda x: em.linalg.solve_triangular(x, x, upper=True), lambda x: em.linalg.inv_ex(x).inverse):
        got = fn(low)
        assert got.dtype is low.dtype
        np.testing.assert_allclose(got.float().numpy(), fn(exact).numpy(), rtol=2e-2, atol=2e-2)


def test_the_new_functions_run_in_a_traced_training_step():
    a0, b = well_conditioned((3, 3)), em.tensor(RNG.standard_normal((3, 2)))

    def loss(a):
        lu, piv = em.linalg.lu_factor(a)
        x = em.linalg.lu_solve(lu, piv, b)
        return ((x * x).sum() + em.linalg.matrix_exp(a * 0.1).sum() + em.linalg.cond(a, 1)
                + em.linalg.solve_triangular(a, b, upper=True).sum() + em.linalg.cholesky_ex(a @ a.mT).L.sum()
                + em.linalg.solve_ex(a, b).result.sum() + em.linalg.householder_product(a, a[0, :2]).sum())

    eager = em.tensor(a0, requires_grad=True)
    loss(eager).backward()

    @em.jit
    def step(a):
        value = loss(a)
        value.backward()
        return value, a.grad

    traced = em.tensor(a0, requires_grad=True)
    value, grad = step(traced)
    np.testing.assert_allclose(value.item(), loss(eager).item(), rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), eager.grad.numpy(), rtol=1e-10)


# ---- PyTorch's top-level forms (torch.svd, torch.lu, torch.cholesky_solve, ...) and their Tensor methods -------------
_RNG = np.random.default_rng(7)
_A = _RNG.standard_normal((2, 3, 3))
_SPD = _A @ np.swapaxes(_A, -1, -2) + 3 * np.eye(3)
_B = _RNG.standard_normal((2, 3, 2))

LEGACY = {
    "svd_V": lambda L, a, s, b: L.svd(a)[2].abs(),
    "svd_some_false": lambda L, a, s, b: L.svd(a[..., :2], some=False)[0].abs(),
    "svd_no_uv": lambda L, a, s, b: L.svd(a, compute_uv=False),
    "qr": lambda L, a, s, b: L.qr(a)[1].abs(),
    "cholesky_upper": lambda L, a, s, b: L.cholesky(s, upper=True),
    "cholesky_solve": lambda L, a, s, b: L.cholesky_solve(b, L.linalg.cholesky(s)),
    "cholesky_solve_upper": lambda L, a, s, b: L.cholesky_solve(b, L.linalg.cholesky(s).mT, upper=True),
    "cholesky_inverse": lambda L, a, s, b: L.cholesky_inverse(L.linalg.cholesky(s)),
    "lu": lambda L, a, s, b: L.lu(a)[0],
    "lu_solve": lambda L, a, s, b: L.lu_solve(b, *L.lu(a)),
    "lu_unpack": lambda L, a, s, b: L.lu_unpack(*L.lu(a)),
    "triangular_solve": lambda L, a, s, b: L.triangular_solve(b, L.linalg.cholesky(s), upper=False),
    "triangular_solve_transposed": lambda L, a, s, b: L.triangular_solve(b, L.linalg.cholesky(s), upper=False,
                                                                          transpose=True)[0],
    "matrix_exp": lambda L, a, s, b: L.matrix_exp(a * 0.3),
    "matrix_power": lambda L, a, s, b: L.matrix_power(a, -2),
    "chain_matmul": lambda L, a, s, b: L.chain_matmul(a[0], a[1], b[0]),
    "methods": lambda L, a, s, b: (a.matrix_exp(), a.matrix_power(2), a.lu()[0], b.cholesky_solve(s.cholesky()),
                                   a.svd()[1], s.cholesky_inverse() * 0 + s.cholesky()),
}


@pytest.mark.parametrize("name", list(LEGACY))
def test_top_level_legacy_forms_match_torch(name) -> None:
    import warnings

    results = []
    for lib in (torch, em):
        a, s, b = (lib.tensor(v, requires_grad=True) for v in (_A, _SPD, _B))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's deprecation notes
            out = LEGACY[name](lib, a, s, b)
            outs = out if isinstance(out, tuple) else (out,)
            total = sum((o.double() * (k + 1)).sum() for k, o in enumerate(outs) if o.is_floating_point())
            grads = lib.autograd.grad(total, (a, s, b), allow_unused=True) if total.requires_grad else (None,) * 3
        results.append(([o.detach().numpy() for o in outs], [None if g is None else g.numpy() for g in grads]))
    (theirs, their_grads), (ours, our_grads) = results
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-9)
    for o, t in zip(our_grads, their_grads):
        assert (o is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(o, t, rtol=1e-7, atol=1e-8)
