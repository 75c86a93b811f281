"""The LU family of `ember.linalg`: triangular solves, the pivoted LU factorisation and what is built on it
(lu, lu_factor(_ex), lu_solve, solve_ex, inv_ex).

Two ops carry the arithmetic: `linalg.solve_triangular` (substitution, so a zero on the diagonal gives inf/NaN
as BLAS's trsm does, never an error) and `linalg.lu_factor_ex` (LAPACK getrf's partial pivoting written in
NumPy: the core has no SciPy). Everything else is composed of them, so gradients of every order, the meta
device and graphs come from their rules. Pivots are PyTorch's: 1-based int32, row i swapped with pivots[i].
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ember.dispatch import apply
from ember.errors import DtypeError, IndexOutOfBoundsError, LinAlgError, ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import broadcast_shapes, refuse_mixed, spec
from ember.ops.linalg_decomp import _LinalgOp, _mm, _mT, check_float, check_matrix, is_vector_rhs

INT32_NP = np.dtype(np.int32)


def _batch_of(op: str, *shapes) -> tuple:
    """The broadcast batch shape of several matrix shapes (their dims before the last two)."""
    return broadcast_shapes(op, *[tuple(s[:-2]) for s in shapes])


def _check_rhs(op: str, a, b, left: bool, a_name: str = "A") -> None:
    """B is a batch of matrices whose rows (left) or columns (right) match square A's size."""
    if len(b.shape) < 2:
        raise ShapeError(f"{op}: B must have at least 2 dimensions, got shape {fmt_shape(b.shape)}")
    n, k = a.shape[-1], b.shape[-2] if left else b.shape[-1]
    if None not in (n, k) and n != k:
        eq = "AX = B" if left else "XA = B"
        raise ShapeError(f"{op}: incompatible shapes of {a_name} {fmt_shape(a.shape)} and B {fmt_shape(b.shape)} "
                         f"for the equation {eq}")


# --- solve_triangular ------------------------------------------------------------------------------------------
def substitute(xp, a, b, upper: bool, unit: bool):
    """X with A X = B for triangular A (only its `upper`/lower triangle read), batched: row by row substitution."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    n = a.shape[-1]
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    x = xp.empty(batch + b.shape[-2:], dtype=np.result_type(a.dtype, b.dtype))
    for i in range(n - 1, -1, -1) if upper else range(n):
        lo, hi = (i + 1, n) if upper else (0, i)
        r = b[..., i, :] - xp.matmul(a[..., i : i + 1, lo:hi], x[..., lo:hi, :])[..., 0, :]
        x[..., i, :] = r if unit else r / a[..., i, i, None]  # a zero pivot gives inf/NaN, as trsm
    return x


class SolveTriangularOp(_LinalgOp):
    name = "linalg.solve_triangular"
    save_inputs = (0,)
    save_outputs = (0,)

    def check(self, a, b, upper=False, left=True, unitriangular=False):
        for x in (a, b):
            check_float(self.name, x.dtype)
        check_matrix(self.name, a.shape)
        _check_rhs(self.name, a, b, left)
        refuse_mixed(self.name, ("A", "B"), a, b)
        return spec(_batch_of(self.name, a.shape, b.shape) + tuple(b.shape[-2:]), a.dtype)

    def compute(self, xp, a, b, upper=False, left=True, unitriangular=False):
        with np.errstate(all="ignore"):  # a singular triangle's inf/NaN are the answer, quietly, as PyTorch
            if left:
                return substitute(xp, a, b, upper, unitriangular)
            # X A = B is A^T X^T = B^T: the other triangle of A^T
            at, bt = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2)
            return xp.swapaxes(substitute(xp, at, bt, not upper, unitriangular), -1, -2)

    def vjp(self, ctx, g):
        from ember.ops.shape import tril, triu

        upper, left = ctx.attrs.get("upper", False), ctx.attrs.get("left", True)
        unit = ctx.attrs.get("unitriangular", False)
        a, x = ctx.input(0), ctx.output
        gb = solve_triangular(_mT(a), g, upper=not upper, left=left, unitriangular=unit)
        if not ctx.needs_grad(0):
            return None, gb
        ga = -_mm(gb, _mT(x)) if left else -_mm(_mT(x), gb)
        # only the triangle the solve read carries gradient (PyTorch's projection)
        ga = triu(ga, 1 if unit else 0) if upper else tril(ga, -1 if unit else 0)
        return ga, gb


_solve_triangular_op = register(SolveTriangularOp())


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """X with A X = B (left) or X A = B for triangular A, reading only its upper or lower triangle."""
    return apply(_solve_triangular_op, A, B, upper=bool(upper), left=bool(left), unitriangular=bool(unitriangular))


# --- the LU factorisation ------------------------------------------------------------------------------------------
def getrf(xp, a):
    """LAPACK getrf's partial-pivoting LU of a batch of m x n matrices: (packed LU, 1-based int32 pivots, info)."""
    *batch, m, n = a.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    lu = xp.array(a, copy=True).reshape((count, m, n))
    piv = xp.empty((count, k), dtype=INT32_NP)
    info = xp.zeros((count,), dtype=INT32_NP)
    rows = xp.arange(count)
    for j in range(k):
        p = xp.argmax(xp.abs(lu[:, j:, j]), axis=1) + j  # the first largest, as idamax
        piv[:, j] = p + 1
        top = lu[rows, j, :].copy()
        lu[rows, j, :] = lu[rows, p, :]
        lu[rows, p, :] = top
        d = lu[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1  # the first exactly zero pivot, as LAPACK reports it
        if j + 1 < m:
            # a zero pivot's column is all zeros below it: left unscaled, as getf2 does
            lu[:, j + 1 :, j] /= xp.where(zero, 1, d)[:, None]
            if j + 1 < n:
                lu[:, j + 1 :, j + 1 :] -= lu[:, j + 1 :, j, None] * lu[:, j, None, j + 1 :]
    return lu.reshape(a.shape), piv.reshape((*batch, k)), info.reshape(tuple(batch))


def _failure(xp, api: str, info, batched: bool) -> str:
    """PyTorch's message for the first matrix whose LU has a zero pivot."""
    flat = info.reshape(-1)
    b = int(xp.flatnonzero(flat)[0])
    i = int(flat[b])
    at = f"(Batch element {b}): " if batched else ""
    if api == "linalg.inv_ex":
        what = f"the diagonal element {i} is zero, the inversion could not be completed because the input matrix is singular"
    elif api == "linalg.solve_ex":
        what = f"the solver failed because the input matrix is singular (U[{i},{i}] is zero)"
    else:
        what = (f"U[{i},{i}] is zero and using it on lu_solve would result in a division by zero; "
                "linalg.lu_factor_ex or linalg.lu factor such a matrix without this check")
    return f"{api}: {at}{what}"


class LUFactorOp(_LinalgOp):
    name = "linalg.lu_factor_ex"
    n_outputs = 3
    save_outputs = (0, 1)

    # `api` names the public function for messages; `check_errors` makes a zero pivot an error, as PyTorch's
    def check(self, a, api="linalg.lu_factor_ex", check_errors=False):
        check_float(api, a.dtype)
        if len(a.shape) < 2:
            raise ShapeError(f"{api}: A must have at least 2 dimensions, got shape {fmt_shape(a.shape)}")
        *batch, m, n = a.shape
        k = None if m is None or n is None else min(m, n)
        return spec(a.shape, a.dtype), spec((*batch, k), INT32_NP), spec(tuple(batch), INT32_NP)

    def compute(self, xp, a, api="linalg.lu_factor_ex", check_errors=False):
        lu, piv, info = getrf(xp, a)
        if check_errors and bool((info != 0).any()):
            raise LinAlgError(_failure(xp, api, info, a.ndim > 2))
        return lu, piv, info

    def vjp(self, ctx, g, _gpiv=None, _ginfo=None):
        from ember.ops.shape import narrow

        lu, piv = ctx.output_at(0), ctx.output_at(1)
        m, n = ctx.in_shape(0)[-2:]
        k = min(m, n)
        p, low, up = unpack(lu, piv)
        # the packed gradient splits into L's (strictly lower) and U's (upper) parts, as PyTorch's
        return (lu_backward(narrow(g, -1, 0, k), narrow(g, -2, 0, k), p, low, up),)


_lu_factor_op = register(LUFactorOp())


def lu_backward(gl, gu, p, low, up):
    """The gradient of A = P L U (L m x k unit lower, U k x n upper) from those of L and U (PyTorch's rule)."""
    from ember.ops.shape import cat, narrow, tril, triu

    m, n = low.shape[-2], up.shape[-1]
    k = min(m, n)
    if m == n:
        # gA = P L^{-T} (tril(L^T gL, -1) + triu(gU U^T)) U^{-T}
        inner = tril(_mm(_mT(low), gl), -1) + triu(_mm(gu, _mT(up)))
        inner = solve_triangular(_mT(up), inner, upper=False, left=False)
        return _mm(p, solve_triangular(_mT(low), inner, upper=True, unitriangular=True))
    if m < n:  # wide: A = P L (U1 | U2)
        u1, g1, g2 = narrow(up, -1, 0, k), narrow(gu, -1, 0, k), narrow(gu, -1, k, n - k)
        inner = tril(_mm(_mT(low), gl) - _mm(triu(gu), _mT(up)), -1)
        inner = solve_triangular(_mT(u1), inner, upper=False, left=False)
        inner = cat([inner + triu(g1), g2], -1)
        return _mm(p, solve_triangular(_mT(low), inner, upper=True, unitriangular=True))
    # tall: A = P (L1 ; L2) U
    l1, g1, g2 = narrow(low, -2, 0, k), narrow(gl, -2, 0, k), narrow(gl, -2, k, m - k)
    inner = triu(_mm(gu, _mT(up)) - _mm(_mT(low), tril(gl, -1)))
    inner = solve_triangular(_mT(l1), inner, upper=True, unitriangular=True)
    inner = cat([inner + tril(g1, -1), g2], -2)
    return _mm(p, solve_triangular(_mT(up), inner, upper=False, left=False))


class PivotsToPermutationOp(Op):
    """P with A = P L U from LU's pivots: a constant of the factorisation (no gradient)."""

    name = "linalg.lu_permutation"
    differentiable = False
    fresh_output = True

    def infer(self, piv, lu):
        if piv.dtype != INT32_NP:
            raise DtypeError(f"linalg.lu_solve: pivots must be int32 (as linalg.lu_factor returns them), "
                             f"got {np.dtype(piv.dtype).name}")
        m = lu.shape[-2]
        return spec((*piv.shape[:-1], m, m), lu.dtype)

    def kernel(self, xp, piv, lu):
        out = self.infer(piv, lu)
        m, k = lu.shape[-2], piv.shape[-1]
        count = int(np.prod(piv.shape[:-1], dtype=np.int64))
        flat = piv.reshape((count, k)).astype(np.int64) - 1
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= m):
            raise IndexOutOfBoundsError(f"linalg.lu_solve: pivots must lie in [1, {m}] (LU is {fmt_shape(lu.shape)}); "
                                        "pass the pivots linalg.lu_factor returned")
        perm = xp.broadcast_to(xp.arange(m), (count, m)).copy()
        rows = xp.arange(count)
        for i in range(k):  # replay getrf's row swaps: P^T A = A[perm]
            p = flat[:, i]
            top = perm[rows, i].copy()
            perm[rows, i] = perm[rows, p]
            perm[rows, p] = top
        pt = xp.eye(m, dtype=out.dtype)[perm]
        return xp.swapaxes(pt, -1, -2).reshape(out.shape)


_permutation_op = register(PivotsToPermutationOp())


def unpack(LU, pivots):  # noqa: N803 - PyTorch's names
    """(P, L, U) of a packed factorisation: L m x k with a unit diagonal, U k x n."""
    from ember.ops.creation_ops import eye_like
    from ember.ops.shape import narrow, tril, triu

    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    p = apply(_permutation_op, pivots, LU)
    low = tril(narrow(LU, -1, 0, k), -1) + narrow(eye_like(LU, m), -1, 0, k)
    return p, low, triu(narrow(LU, -2, 0, k))


# --- PyTorch's functions on them -------------------------------------------------------------------------------------
LUResult = namedtuple("LUResult", ["P", "L", "U"])
LUFactorResult = namedtuple("LUFactorResult", ["LU", "pivots"])
LUFactorExResult = namedtuple("LUFactorExResult", ["LU", "pivots", "info"])
SolveExResult = namedtuple("SolveExResult", ["result", "info"])
InvExResult = namedtuple("InvExResult", ["inverse", "info"])


def _no_pivot(op: str, pivot: bool) -> None:
    if not pivot:
        raise NotImplementedError(f"{op}: LU without pivoting is not implemented (as on PyTorch's CPU)")


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:  # noqa: N803
    """The packed LU factorisation with pivots, and info: 0, or the 1-based index of U's first zero pivot."""
    _no_pivot("linalg.lu_factor_ex", pivot)
    lu, piv, info = apply(_lu_factor_op, A, api="linalg.lu_factor_ex", check_errors=bool(check_errors))
    return LUFactorExResult(lu, piv, info)


def lu_factor(A, *, pivot: bool = True) -> LUFactorResult:  # noqa: N803
    """The packed LU factorisation with pivots (LinAlgError when U has a zero pivot: a singular matrix)."""
    _no_pivot("linalg.lu_factor", pivot)
    lu, piv, _ = apply(_lu_factor_op, A, api="linalg.lu_factor", check_errors=True)
    return LUFactorResult(lu, piv)


def lu(A, *, pivot: bool = True) -> LUResult:  # noqa: N803
    """P, L (unit lower), U (upper) with A = P L U; singular matrices too."""
    _no_pivot("linalg.lu", pivot)
    lu_, piv, _ = apply(_lu_factor_op, A, api="linalg.lu")
    return LUResult(*unpack(lu_, piv))


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):  # noqa: N803
    """X with A X = B (A^T X = B when adjoint; X A = B, X A^T = B when not left), A given by lu_factor's result."""
    op = "linalg.lu_solve"
    check_float(op, LU._data.dtype)
    check_float(op, B._data.dtype)
    check_matrix(op, LU.shape, name="LU")
    _check_rhs(op, LU, B, left, "LU")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise ShapeError(f"{op}: pivots must have shape {fmt_shape(LU.shape[:-1])} for LU of shape "
                         f"{fmt_shape(LU.shape)}, got {fmt_shape(pivots.shape)}")
    refuse_mixed(op, ("LU", "B"), LU, B)
    _batch_of(op, LU.shape, B.shape)
    p = apply(_permutation_op, pivots, LU)
    # A = P L U with L the unit lower triangle of LU and U its upper one; A^T's factors are those of LU^T
    if left and not adjoint:  # X = U^{-1} L^{-1} P^T B
        x = solve_triangular(LU, _mm(_mT(p), B), upper=False, unitriangular=True)
        return solve_triangular(LU, x, upper=True)
    if left:  # A^T X = B: X = P L^{-T} U^{-T} B
        x = solve_triangular(_mT(LU), B, upper=False)
        return _mm(p, solve_triangular(_mT(LU), x, upper=True, unitriangular=True))
    if not adjoint:  # X A = B: X = B U^{-1} L^{-1} P^T
        x = solve_triangular(LU, B, upper=True, left=False)
        return _mm(solve_triangular(LU, x, upper=False, left=False, unitriangular=True), _mT(p))
    # X A^T = B: X = B P L^{-T} U^{-T}
    x = solve_triangular(_mT(LU), _mm(B, p), upper=True, left=False, unitriangular=True)
    return solve_triangular(_mT(LU), x, upper=False, left=False)


def _check_square_float(op: str, A) -> None:  # noqa: N803
    check_float(op, A._data.dtype)
    check_matrix(op, A.shape)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False) -> SolveExResult:  # noqa: N803
    """linalg.solve without the error: (X, info), info the 1-based index of U's first zero pivot (0: solved)."""
    from ember.ops.shape import squeeze, unsqueeze

    op = "linalg.solve_ex"
    _check_square_float(op, A)
    check_float(op, B._data.dtype)
    vector = left and is_vector_rhs(A.shape, B.shape)
    rhs = unsqueeze(B, -1) if vector else B
    _check_rhs(op, A, rhs, left)
    refuse_mixed(op, ("A", "B"), A, B)
    _batch_of(op, A.shape, rhs.shape)
    lu_, piv, info = apply(_lu_factor_op, A, api=op, check_errors=bool(check_errors))
    x = lu_solve(lu_, piv, rhs, left=left)
    return SolveExResult(squeeze(x, -1) if vector else x, info)


def inv_ex(A, *, check_errors: bool = False) -> InvExResult:  # noqa: N803
    """linalg.inv without the error: (inverse, info), info the 1-based index of U's first zero pivot (0: inverted)."""
    from ember.ops.creation_ops import eye_like

    op = "linalg.inv_ex"
    _check_square_float(op, A)
    lu_, piv, info = apply(_lu_factor_op, A, api=op, check_errors=bool(check_errors))
    eye = eye_like(A, A.shape[-1]).expand(*A.shape)
    return InvExResult(lu_solve(lu_, piv, eye), info)


__all__ = [
    "InvExResult", "LUFactorExResult", "LUFactorResult", "LUResult", "SolveExResult", "getrf", "inv_ex", "lu",
    "lu_backward", "lu_factor", "lu_factor_ex", "lu_solve", "solve_ex", "solve_triangular", "substitute", "unpack",
]
