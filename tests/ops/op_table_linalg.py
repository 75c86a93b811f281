"""Op-table rows of `ember.linalg` (torch.linalg): inverses, determinants, solves, decompositions and norms.

Imported by op_table.py, whose `row` adds them to the one table. Matrices are well conditioned (a random
matrix plus n on the diagonal; symmetric positive-definite ones are built inside the row from a general
matrix, so gradients and finite differences see every entry). Outputs that are defined only up to a sign
(eigenvectors, singular vectors) enter through sign-free functions of them.
"""

from __future__ import annotations

import numpy as np

from .helpers import Tol
from .inputs import Rand
from .op_table import row

# LAPACK builds differ between NumPy and PyTorch: a few float32 ulps, more through a factorisation's gradient.
LINALG = Tol((1e-4, 1e-5), (1e-9, 1e-10))
NO_LOW = {d: "PyTorch's CPU linalg has no float16/bfloat16 kernels" for d in ("float16", "bfloat16")}
INF = float("inf")


def lrow(name: str, fn, make, **kw) -> None:
    """A linalg row: LINALG tolerance, and no float16/bfloat16 comparison (PyTorch refuses those)."""
    kw.setdefault("tol", LINALG)
    row(name, fn, make, skip_low=NO_LOW, **kw)


def _square(r: Rand, n: int, batch: tuple = ()) -> np.ndarray:
    """A well-conditioned random n x n matrix (or a batch of them)."""
    return (r.normal(batch + (n, n)) + n * np.eye(n)).astype(r.dtype)


def square(batched: bool = True):
    """One well-conditioned square matrix, batched at random."""
    def make(r: Rand):
        return [_square(r, r.size(1, 4), r.shape(0, 2, 1, 3) if batched else ())]
    return make


def rect(tall: bool):
    """One random m x n matrix with m > n (tall) or m < n (wide), maybe batched."""
    def make(r: Rand):
        a, b = r.size(1, 3), r.size(1, 3)
        m, n = (a + b, a) if tall else (a, a + b)
        return [r.normal(r.shape(0, 1, 1, 3) + (m, n))]
    return make


def square_and(rhs):
    """A square matrix and a right-hand side of shape rhs(n, batch)."""
    def make(r: Rand):
        n, batch = r.size(1, 4), r.shape(0, 2, 1, 3)
        return [_square(r, n, batch), r.normal(rhs(n, batch, r))]
    return make


def spd(L, a):
    """A symmetric positive-definite matrix built from a (differentiably)."""
    return a @ a.mT + L.eye(a.shape[-1], dtype=a.dtype, device=a.device)


def _svd_parts(res):
    """Sign-free functions of U, S, Vh: S, U*U, Vh*Vh and U @ Vh (signs of u_i and v_i flip together)."""
    u, s, vh = res
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    return s, u * u, vh * vh, u @ vh


lrow("linalg_inv", lambda L, a: L.linalg.inv(a), square())
lrow("linalg_det", lambda L, a: L.linalg.det(a), square())
lrow("linalg_slogdet", lambda L, a: tuple(L.linalg.slogdet(a)), square())
lrow("linalg_slogdet_negative", lambda L, a: tuple(L.linalg.slogdet(-a)), lambda r: [_square(r, 3)])
lrow("linalg_solve", lambda L, a, b: L.linalg.solve(a, b), square_and(lambda n, batch, r: batch + (n, r.size(1, 3))))
lrow("linalg_solve_vector", lambda L, a, b: L.linalg.solve(a, b), square_and(lambda n, batch, r: batch + (n,)))
lrow("linalg_solve_1d", lambda L, a, b: L.linalg.solve(a, b), square_and(lambda n, batch, r: (n,)))
lrow("linalg_solve_broadcast", lambda L, a, b: L.linalg.solve(a, b),
     lambda r: [_square(r, 3), r.normal((2, 3, 2))])
lrow("linalg_solve_left_false", lambda L, a, b: L.linalg.solve(a, b, left=False),
     square_and(lambda n, batch, r: batch + (r.size(1, 3), n)))
lrow("linalg_cholesky", lambda L, a: L.linalg.cholesky(spd(L, a)), square())
lrow("linalg_cholesky_upper", lambda L, a: L.linalg.cholesky(spd(L, a), upper=True), square())
lrow("linalg_qr_tall", lambda L, a: tuple(L.linalg.qr(a)), rect(tall=True))
lrow("linalg_qr_square", lambda L, a: tuple(L.linalg.qr(a)), square())
lrow("linalg_qr_wide", lambda L, a: tuple(L.linalg.qr(a)), rect(tall=False))
lrow("linalg_qr_complete_wide", lambda L, a: tuple(L.linalg.qr(a, mode="complete")), rect(tall=False))
lrow("linalg_qr_r", lambda L, a: L.linalg.qr(a, mode="r")[1], rect(tall=True), grad=False)
lrow("linalg_eigh", lambda L, a: (lambda w, v: (w, v * v))(*L.linalg.eigh(a + a.mT)), square())
lrow("linalg_eigh_upper", lambda L, a: (lambda w, v: (w, v * v))(*L.linalg.eigh(a + a.mT, UPLO="U")), square())
lrow("linalg_eigvalsh", lambda L, a: L.linalg.eigvalsh(a + a.mT), square())
lrow("linalg_svd_tall", lambda L, a: _svd_parts(L.linalg.svd(a, full_matrices=False)), rect(tall=True))
lrow("linalg_svd_wide", lambda L, a: _svd_parts(L.linalg.svd(a, full_matrices=False)), rect(tall=False))
lrow("linalg_svd_full", lambda L, a: _svd_parts(L.linalg.svd(a)), rect(tall=True))
lrow("linalg_svdvals", lambda L, a: L.linalg.svdvals(a), rect(tall=False))
lrow("linalg_pinv_tall", lambda L, a: L.linalg.pinv(a), rect(tall=True))
lrow("linalg_pinv_wide", lambda L, a: L.linalg.pinv(a), rect(tall=False))
lrow("linalg_pinv_hermitian", lambda L, a: L.linalg.pinv(a + a.mT, hermitian=True), square())
lrow("linalg_lstsq", lambda L, a, b: L.linalg.lstsq(a, b).solution,
     lambda r: [r.normal((5, 3)), r.normal((5, r.size(1, 3)))])
lrow("linalg_lstsq_gelsd", lambda L, a, b: tuple(L.linalg.lstsq(a, b, driver="gelsd"))[:2],
     lambda r: [r.normal((2, 5, 3)), r.normal((2, 5, 2))])
lrow("linalg_lstsq_vector", lambda L, a, b: L.linalg.lstsq(a, b).solution, lambda r: [r.normal((4, 2)), r.normal((4,))])
lrow("linalg_lstsq_underdetermined", lambda L, a, b: L.linalg.lstsq(a, b, driver="gelsd").solution,
     lambda r: [r.normal((2, 4)), r.normal((2, 3))])
lrow("linalg_lstsq_rank_and_singular_values", lambda L, a, b: (
    L.linalg.lstsq(a, b).rank, L.linalg.lstsq(a, b, driver="gels").rank, *tuple(L.linalg.lstsq(a, b, driver="gelss"))[1:],
    L.linalg.lstsq(a, b).residuals), lambda r: [r.normal((4, 3)), r.normal((4, 2))], grad=False)
for _ord in (2, 1, 3, 0.5, -1, INF, -INF, 0):
    lrow(f"linalg_vector_norm_{_ord}", (lambda o: lambda L, x: L.linalg.vector_norm(x, o, -1))(_ord),
         lambda r: [r.distinct(r.shape(1, 3))], gradcheck=_ord != 0)
lrow("linalg_vector_norm_dims_keepdim", lambda L, x: L.linalg.vector_norm(x, 2, (0, -1), True),
     lambda r: [r.away(r.shape(2, 3))])
lrow("linalg_vector_norm_all", lambda L, x: L.linalg.vector_norm(x), lambda r: [r.away(r.shape(0, 3))])
lrow("linalg_vector_norm_dtype", lambda L, x: L.linalg.vector_norm(x, dtype=L.float64), lambda r: [r.away((3, 2))])
for _ord in ("fro", "nuc", 2, -2, 1, -1, INF, -INF):
    lrow(f"linalg_matrix_norm_{_ord}", (lambda o: lambda L, a: L.linalg.matrix_norm(a, o))(_ord),
         lambda r: [r.distinct(r.shape(0, 1, 1, 3) + (3, 4))])
lrow("linalg_matrix_norm_dims_keepdim", lambda L, a: L.linalg.matrix_norm(a, "nuc", (0, 2), True),
     lambda r: [r.distinct((3, 2, 4))])
lrow("linalg_norm", lambda L, a: L.linalg.norm(a), lambda r: [r.away(r.shape(1, 3))])
lrow("linalg_norm_matrix_ord", lambda L, a: L.linalg.norm(a, INF), lambda r: [r.distinct((3, 4))])
lrow("linalg_norm_dim", lambda L, a: L.linalg.norm(a, 3, dim=1, keepdim=True), lambda r: [r.away((2, 3, 2))])
lrow("linalg_multi_dot", lambda L, a, b, c: L.linalg.multi_dot([a, b, c]),
     lambda r: [r.normal((3,)), r.normal((3, 4)), r.normal((4, 2))])
lrow("linalg_vecdot", lambda L, a, b: L.linalg.vecdot(a, b), lambda r: [r.normal((2, 3)), r.normal((3,))])

# PyTorch's top-level names and methods
lrow("inverse_method", lambda L, a: a.inverse(), square())
lrow("det_fn_and_method", lambda L, a: (L.det(a), a.det()), square())
lrow("logdet", lambda L, a: L.logdet(a), lambda r: [np.stack([_square(r, 3), -_square(r, 3)])], gradcheck=False)
lrow("logdet_positive", lambda L, a: a.logdet(), lambda r: [(m := _square(r, 3)) * np.sign(np.linalg.det(m))])
lrow("slogdet_fn", lambda L, a: tuple(L.slogdet(a)), square())
lrow("pinverse", lambda L, a: (L.pinverse(a), a.pinverse(rcond=1e-3)), rect(tall=True))

# --- the rest of torch.linalg: the LU family (ember/ops/linalg_lu.py) and ember/ops/linalg_extra.py ----------------
lrow("linalg_solve_triangular_lower", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False),
     square_and(lambda n, batch, r: batch + (n, r.size(1, 3))))
lrow("linalg_solve_triangular_upper_unit", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True, unitriangular=True),
     square_and(lambda n, batch, r: batch + (n, r.size(1, 3))))
lrow("linalg_solve_triangular_right", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True, left=False),
     square_and(lambda n, batch, r: batch + (r.size(1, 3), n)))
lrow("linalg_solve_triangular_right_unit_lower",
     lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
     square_and(lambda n, batch, r: batch + (r.size(1, 3), n)))
lrow("linalg_solve_triangular_broadcast", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True),
     lambda r: [_square(r, 3, (2, 1)), r.normal((3, 3, 2))])
lrow("linalg_lu_factor", lambda L, a: tuple(L.linalg.lu_factor(a)), square())
lrow("linalg_lu_factor_ex", lambda L, a: tuple(L.linalg.lu_factor_ex(a)), square())
lrow("linalg_lu_factor_tall", lambda L, a: tuple(L.linalg.lu_factor(a)), rect(tall=True))
lrow("linalg_lu_factor_wide", lambda L, a: tuple(L.linalg.lu_factor_ex(a)), rect(tall=False))
lrow("linalg_lu", lambda L, a: tuple(L.linalg.lu(a)), square())
lrow("linalg_lu_tall", lambda L, a: tuple(L.linalg.lu(a)), rect(tall=True))
lrow("linalg_lu_wide", lambda L, a: tuple(L.linalg.lu(a)), rect(tall=False))
lrow("linalg_lu_solve", lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b),
     square_and(lambda n, batch, r: batch + (n, r.size(1, 3))))
lrow("linalg_lu_solve_adjoint", lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, adjoint=True),
     square_and(lambda n, batch, r: batch + (n, r.size(1, 3))))
lrow("linalg_lu_solve_right", lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, left=False),
     square_and(lambda n, batch, r: batch + (r.size(1, 3), n)))
lrow("linalg_lu_solve_right_adjoint_broadcast",
     lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, left=False, adjoint=True),
     lambda r: [_square(r, 3, (2, 1)), r.normal((4, 2, 3))])
lrow("linalg_solve_ex", lambda L, a, b: tuple(L.linalg.solve_ex(a, b)), square_and(lambda n, batch, r: batch + (n,)))
lrow("linalg_solve_ex_matrix_right", lambda L, a, b: tuple(L.linalg.solve_ex(a, b, left=False)),
     square_and(lambda n, batch, r: batch + (r.size(1, 3), n)))
lrow("linalg_inv_ex", lambda L, a: tuple(L.linalg.inv_ex(a)), square())
lrow("linalg_cholesky_ex", lambda L, a: tuple(L.linalg.cholesky_ex(spd(L, a))), square())
lrow("linalg_cholesky_ex_upper", lambda L, a: tuple(L.linalg.cholesky_ex(spd(L, a), upper=True)), square())
# PyTorch's cond for p = +-1, +-inf, 'fro' writes its inverse in place and cannot differentiate it: finite differences
# check Ember's gradients (first and second) there.
for _p in (None, 2, -2, "nuc", 1, -1, INF, -INF, "fro"):
    _fd_only = _p in (1, -1, INF, -INF, "fro")
    lrow(f"linalg_cond_{_p}", (lambda p: lambda L, a: L.linalg.cond(a, p))(_p), square(),
         torch_grad=not _fd_only, torch_second=not _fd_only)
lrow("linalg_cond_rect", lambda L, a: L.linalg.cond(a), rect(tall=False))


def _deficient(r: Rand):
    """A batch of 4 x 3 matrices of rank 3, 2, 1 and 0 (exact zeros: the rank is clear-cut in float32 too)."""
    a = r.normal((4, 4, 3))
    a[1, :, 2] = a[1, :, 0] + a[1, :, 1]
    a[2] = np.outer(r.normal((4,)), r.normal((3,)))
    a[3] = 0
    return a


lrow("linalg_matrix_rank", lambda L, a: L.linalg.matrix_rank(a), lambda r: [_deficient(r)], grad=False)
lrow("linalg_matrix_rank_tolerances", lambda L, a: (L.linalg.matrix_rank(a, atol=1.0, rtol=0.1),
                                                    L.linalg.matrix_rank(a, 0.5), L.linalg.matrix_rank(a, rtol=0.5)),
     lambda r: [_deficient(r)], grad=False)
lrow("linalg_matrix_rank_hermitian", lambda L, a: L.linalg.matrix_rank(a @ a.mT, hermitian=True),
     lambda r: [_deficient(r)], grad=False)
lrow("linalg_diagonal", lambda L, a: L.linalg.diagonal(a, offset=1), lambda r: [r.normal(r.shape(2, 4, 1, 4))])
lrow("linalg_diagonal_dims", lambda L, a: L.linalg.diagonal(a, offset=-1, dim1=0, dim2=2),
     lambda r: [r.normal((3, 2, 4))])
lrow("linalg_vander", lambda L, x: L.linalg.vander(x), lambda r: [r.normal(r.shape(1, 3, 2, 4))])
lrow("linalg_vander_n", lambda L, x: L.linalg.vander(x, N=4), lambda r: [r.normal(r.shape(0, 2))])
lrow("linalg_vander_int", lambda L, x: L.linalg.vander(x, N=3), lambda r: [r.ints(r.shape(1, 2), -4, 5, r.dtype)],
     dtypes=("int64", "int32"), grad=False)
lrow("linalg_tensorinv", lambda L, a: L.linalg.tensorinv(a, ind=1),
     lambda r: [(r.normal((6, 6)) + 6 * np.eye(6)).reshape(6, 2, 3).astype(r.dtype)])
lrow("linalg_tensorinv_ind2", lambda L, a: L.linalg.tensorinv(a),
     lambda r: [(r.normal((6, 6)) + 6 * np.eye(6)).reshape(2, 3, 6).astype(r.dtype)])
lrow("linalg_tensorsolve", lambda L, a, b: L.linalg.tensorsolve(a, b),
     lambda r: [(r.normal((6, 6)) + 6 * np.eye(6)).reshape(2, 3, 6).astype(r.dtype), r.normal((2, 3))])
lrow("linalg_tensorsolve_dims", lambda L, a, b: L.linalg.tensorsolve(a, b, dims=(0,)),
     lambda r: [(r.normal((6, 6)) + 6 * np.eye(6)).reshape(6, 2, 3).astype(r.dtype), r.normal((2, 3))])
lrow("linalg_matrix_exp", lambda L, a: L.linalg.matrix_exp(a), lambda r: [r.normal(r.shape(0, 2, 1, 3) + (3, 3))])
lrow("linalg_matrix_exp_scaled", lambda L, a: L.linalg.matrix_exp(a), lambda r: [r.normal((2, 2), scale=4.0)])
lrow("linalg_householder_product", lambda L, a, t: L.linalg.householder_product(a, t),
     lambda r: [r.normal((2, 5, 3)), r.normal((2, 2))])
