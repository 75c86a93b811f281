"""The rest of `torch.linalg` for `ember.linalg`: cholesky_ex and matrix_exp (ops: their values need their own
kernels), and cond, matrix_rank, diagonal, vander, tensorinv, tensorsolve and householder_product, composed of
existing ops so their gradients, meta shapes and graphs come from those.

Bad arguments raise PyTorch's class: a `DomainError` (a ValueError and a RuntimeError) for a value outside what
the function accepts (cond's p, tensorinv's ind, vander's N), `ShapeError` for shapes, `DtypeError` for dtypes.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ember import dtypes as dt
from ember.dispatch import apply
from ember.errors import DomainError, DtypeError, LinAlgError, ShapeError, fmt_shape
from ember.op import register
from ember.ops._rules import norm_dim, refuse_mixed, spec
from ember.ops.linalg_decomp import _LinalgOp, _mm, _mT, check_float, check_matrix, eigvalsh, inv, solve, svdvals
from ember.ops.linalg_lu import INT32_NP, inv_ex, solve_triangular

_INF = math.inf


# --- cholesky_ex -----------------------------------------------------------------------------------------------------
CholeskyExResult = namedtuple("CholeskyExResult", ["L", "info"])


def potf2(a: np.ndarray):
    """LAPACK potf2 on one matrix's lower triangle: (L, info), L as LAPACK leaves it where it stops."""
    # stopping at column j, L holds the finished columns, the failing diagonal value (not its square root) and the
    # input's lower triangle after it: PyTorch's L for such a matrix, as OpenBLAS factors small ones unblocked
    low = np.tril(a).copy()
    for j in range(a.shape[-1]):
        d = low[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0:  # NaN fails too, as in LAPACK
            low[j, j] = d
            return low, j + 1
        d = math.sqrt(d)
        low[j, j] = d
        low[j + 1 :, j] = (low[j + 1 :, j] - low[j + 1 :, :j] @ low[j, :j]) / d
    return low, 0


def cholesky_info(xp, a):
    """The lower Cholesky factors of a batch (read from the lower triangles) and LAPACK's info per matrix."""
    batch, n = a.shape[:-2], a.shape[-1]
    try:  # the common case: every matrix is positive-definite
        return xp.linalg.cholesky(a), xp.zeros(batch, INT32_NP)
    except np.linalg.LinAlgError:
        pass
    count = int(np.prod(batch, dtype=np.int64))
    flat, out = a.reshape((count, n, n)), xp.empty((count, n, n), a.dtype)
    info = np.zeros(count, INT32_NP)
    for b in range(count):
        try:
            out[b] = xp.linalg.cholesky(flat[b])
        except np.linalg.LinAlgError:  # (the failing matrices are few; potf2 runs on the host)
            low, info[b] = potf2(flat[b] if xp is np else xp.asnumpy(flat[b]))
            out[b] = xp.asarray(low)
    return out.reshape(a.shape), xp.asarray(info.reshape(batch))


class CholeskyExOp(_LinalgOp):
    name = "linalg.cholesky_ex"
    n_outputs = 2
    save_outputs = (0,)

    def check(self, a, upper=False, check_errors=False):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        return spec(a.shape, a.dtype), spec(tuple(a.shape[:-2]), INT32_NP)

    def compute(self, xp, a, upper=False, check_errors=False):
        # upper=True reads A's upper triangle, as PyTorch (LAPACK's uplo='U'): the lower one of A^T
        low, info = cholesky_info(xp, xp.swapaxes(a, -1, -2) if upper else a)
        if check_errors and bool((info != 0).any()):
            flat = info.reshape(-1)
            b = int(xp.flatnonzero(flat)[0])
            at = f"(Batch element {b}): " if a.ndim > 2 else ""
            raise LinAlgError(f"{self.name}: {at}the factorization could not be completed because the input is not "
                              f"positive-definite (the leading minor of order {int(flat[b])} is not positive-definite)")
        return (xp.swapaxes(low, -1, -2) if upper else low), info

    def vjp(self, ctx, g, _ginfo=None):
        from ember.ops.shape import tril

        low, gl = ctx.output_at(0), g
        if ctx.attrs.get("upper", False):
            low, gl = _mT(low), _mT(gl)
        # PyTorch's rule: phi = sym(tril(L^T gL)) with a halved diagonal; gA = L^{-T} phi L^{-1}
        x = tril(_mm(_mT(low), gl))
        phi = (x + _mT(tril(x, -1))) * 0.5
        phi = solve_triangular(_mT(low), phi, upper=True)
        return (solve_triangular(low, phi, upper=False, left=False),)


_cholesky_ex_op = register(CholeskyExOp())


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:  # noqa: N803
    """linalg.cholesky without the error: (L, info), info the order of the first non-positive-definite leading minor."""
    low, info = apply(_cholesky_ex_op, A, upper=bool(upper), check_errors=bool(check_errors))
    return CholeskyExResult(low, info)


# --- matrix_exp ------------------------------------------------------------------------------------------------------
# Higham (2005): the [13/13] Pade approximant is accurate to double precision for 1-norms up to theta_13
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _solve_or_nan(xp, a, b):
    """a^{-1} b, NaN for a matrix LAPACK refuses (NaN or inf entries make it 'singular')."""
    try:
        return xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        out = xp.full(np.broadcast_shapes(a.shape, b.shape), np.nan, a.dtype)
        for idx in np.ndindex(*a.shape[:-2]):
            try:
                out[idx] = xp.linalg.solve(a[idx], b[idx])
            except np.linalg.LinAlgError:
                pass
        return out


def expm(xp, a):
    """exp of each square matrix by scaling and squaring with the [13/13] Pade approximant, in float64."""
    x = a.astype(np.float64)
    n = x.shape[-1]
    if x.size == 0:
        return x
    b = _PADE13
    with np.errstate(all="ignore"):  # inf/NaN entries give NaN, overflow gives inf, as PyTorch
        norm = xp.abs(x).sum(axis=-2).max(axis=-1)
        big = xp.isfinite(norm) & (norm > _THETA13)
        s = xp.where(big, xp.ceil(xp.log2(xp.where(big, norm, 1.0) / _THETA13)), 0).astype(np.int64)
        x = x / (2.0 ** s)[..., None, None]
        eye = xp.eye(n)
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
        v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        r = _solve_or_nan(xp, v - u, v + u)
        for i in range(int(s.max()) if s.size else 0):  # undo the scaling: square s times, per matrix
            r = xp.where((s > i)[..., None, None], r @ r, r)
    return r


class MatrixExpOp(_LinalgOp):
    name = "linalg.matrix_exp"
    save_inputs = (0,)

    def check(self, a):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        return spec(a.shape, a.dtype)

    def compute(self, xp, a):
        return expm(xp, a)

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape
        from ember.ops.shape import cat, narrow

        # Mathias (1996), PyTorch's rule: exp([[A^T, G], [0, A^T]]) holds the adjoint derivative in its corner
        at = _mT(ctx.input(0))
        n = at.shape[-1]
        block = cat([cat([at, g], -1), cat([zeros_like_shape(g, g.shape), at], -1)], -2)
        return (narrow(narrow(matrix_exp(block), -2, 0, n), -1, n, n),)


_matrix_exp_op = register(MatrixExpOp())


def matrix_exp(A):  # noqa: N803
    """The matrix exponential of each square matrix in A."""
    return apply(_matrix_exp_op, A)


# --- compositions --------------------------------------------------------------------------------------------------
def _check_cond_p(op: str, p) -> None:
    """p is None, 'fro', 'nuc' or one of 2, -2, 1, -1, inf, -inf (PyTorch's choices)."""
    if p is None:
        return
    if isinstance(p, str):
        ok = p in ("fro", "nuc")
    else:
        ok = isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool) and (
            float(p) in (2.0, -2.0, 1.0, -1.0, _INF, -_INF))
    if not ok:
        raise DomainError(f"{op}: p must be None, 2, -2, 1, -1, inf, -inf, 'fro' or 'nuc', got {p!r}")


def cond(A, p=None):  # noqa: N803
    """The condition number: s_max / s_min for p=None or 2 (-2: s_min / s_max), else norm(A, p) * norm(inv(A), p)."""
    from ember.ops.reduction import sum as _sum

    op = "linalg.cond"
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {fmt_shape(A.shape)}")
    _check_cond_p(op, p)
    check_float(op, A._data.dtype)
    if A.numel() == 0:  # NumPy's (and PyTorch's) 0 for empty matrices: the sum over them, so still a function of A
        return _sum(A, (-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 / 0 and 0 * inf of singular matrices: quietly
        return _cond(A, p)


def _cond(A, p):  # noqa: N803
    """cond's value for a non-empty A and a valid p."""
    from ember.ops.elementwise import gt, where
    from ember.ops.elementwise_composed import nan_to_num
    from ember.ops.linalg_norms import matrix_norm
    from ember.ops.reduction import sum as _sum
    from ember.ops.shape import narrow, squeeze, unsqueeze

    if p is None or not isinstance(p, str) and abs(float(p)) == 2:
        s = svdvals(A)
        hi, lo = narrow(s, -1, 0, 1), narrow(s, -1, s.shape[-1] - 1, 1)
        return squeeze(lo / hi if p == -2 else hi / lo, -1)
    check_matrix(f"linalg.cond(p={p!r})", A.shape)
    if p == "nuc":  # matrix_norm(inv(A), 'nuc') through an SVD of a singular inverse would fail: sum(s) sum(1/s)
        s = svdvals(A)
        return _sum(s, -1) * _sum(1.0 / s, -1)
    inverse, info = inv_ex(A)
    inverse = where(gt(unsqueeze(unsqueeze(info, -1), -1), 0), _INF, inverse)
    return nan_to_num(matrix_norm(A, p) * matrix_norm(inverse, p), _INF, _INF, -_INF)  # 0 * inf is inf here


def matrix_rank(A, tol=None, hermitian: bool = False, *, atol=None, rtol=None):  # noqa: N803
    """The number of singular values (|eigenvalues| when hermitian) above max(atol, rtol * the largest), an int64."""
    from ember.ops.elementwise import abs as _abs
    from ember.ops.elementwise import gt
    from ember.ops.reduction import sum as _sum

    op = "linalg.matrix_rank"
    if tol is not None:  # NumPy's positional tol: an absolute tolerance alone
        if atol is not None or rtol is not None:
            raise TypeError(f"{op}: give tol or atol/rtol, not both")
        atol, rtol = tol, 0.0
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {fmt_shape(A.shape)}")
    check_float(op, A._data.dtype)
    if hermitian:
        check_matrix(f"{op}(hermitian=True)", A.shape)
    A = A.detach()  # a count: no gradient
    s = _abs(eigvalsh(A)) if hermitian else svdvals(A)
    if s.shape[-1] == 0:  # no singular values: rank 0 (and no largest one to scale rtol by)
        return _sum(gt(s, 0), -1)
    s = s.to(dt.float64)  # PyTorch compares in float64
    default = float(np.finfo(A._data.dtype).eps) * max(A.shape[-2:])
    return _sum(gt(s, _rank_cutoff(s, atol, rtol, default)), -1)


def _rank_cutoff(s, atol, rtol, default: float):
    """max(atol, rtol * the largest of s) per matrix; rtol defaults to `default`, or 0 beside a positive atol."""
    from ember.ops.elementwise import clamp_min, gt, maximum, where
    from ember.ops.reduction import amax
    from ember.ops.shape import unsqueeze
    from ember.tensor import Tensor

    if rtol is None:  # PyTorch's rule, elementwise for a tensor atol
        if atol is None:
            rtol = default
        else:
            rtol = where(gt(atol, 0), 0.0, default) if isinstance(atol, Tensor) else (0.0 if atol > 0 else default)
    atol = 0.0 if atol is None else atol
    # a tensor tolerance has the batch's shape: one value per matrix, against its row of singular values
    atol, rtol = [unsqueeze(t.to(dt.float64), -1) if isinstance(t, Tensor) else float(t) for t in (atol, rtol)]
    cutoff = rtol * amax(s, -1, True)
    return maximum(cutoff, atol) if isinstance(atol, Tensor) else clamp_min(cutoff, atol)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):  # noqa: N803
    """The offset-th diagonal of the (dim1, dim2) matrices (the last two by default), as a view."""
    from ember.ops.shape import diagonal as _diagonal

    op = "linalg.diagonal"
    d1, d2 = norm_dim(op, dim1, A.ndim), norm_dim(op, dim2, A.ndim)
    if d1 == d2:
        raise DomainError(f"{op}: dim1 and dim2 must be different dimensions, got {dim1} and {dim2} of a tensor of "
                          f"shape {fmt_shape(A.shape)}")
    return _diagonal(A, offset, d1, d2)


def vander(x, N: int | None = None):  # noqa: N803
    """The Vandermonde matrix with increasing powers: x ** 0, x ** 1, ..., x ** (N - 1) along a new last dim."""
    from ember.ops.creation_ops import ones_like
    from ember.ops.shape import cat, expand, narrow, reshape, unsqueeze
    from ember.ops.sorting import cumprod

    op = "linalg.vander"
    np_dtype = x._data.dtype
    if np_dtype.kind not in "iu" and np_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise DtypeError(f"{op}: x must be float32, float64 or an integer tensor (as in PyTorch), got "
                         f"{dt.from_numpy_dtype(np_dtype).name}")
    x = x if x.ndim else reshape(x, (1,))
    n = x.shape[-1] if N is None else N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 1:
        raise DomainError(f"{op}: N must be an integer greater than 1, got {n!r} (x has shape {fmt_shape(x.shape)})")
    # x ** k as running products (PyTorch's formula: exact for integers, and its gradient exact at zero)
    powers = cumprod(expand(unsqueeze(x, -1), *x.shape, int(n) - 1), -1)
    return cat([ones_like(narrow(powers, -1, 0, 1)), powers], -1)


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def tensorinv(A, ind: int = 2):  # noqa: N803
    """The inverse of A for tensordot over ind dims: A reshaped to a square matrix, inverted, reshaped back."""
    from ember.ops.shape import reshape

    op = "linalg.tensorinv"
    if isinstance(ind, bool) or not isinstance(ind, (int, np.integer)) or ind <= 0:
        raise DomainError(f"{op}: ind must be a positive integer, got {ind!r}")
    check_float(op, A._data.dtype)
    head, tail = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if _prod(head) != _prod(tail):
        raise ShapeError(f"{op}: A of shape {fmt_shape(A.shape)} needs prod(A.shape[ind:]) == prod(A.shape[:ind]) "
                         f"for ind={ind}, got {_prod(tail)} != {_prod(head)}")
    try:
        out = inv(reshape(A, (_prod(tail), _prod(tail))))
    except LinAlgError:
        raise LinAlgError(f"{op}: A of shape {fmt_shape(A.shape)}, as a {_prod(tail)} x {_prod(tail)} matrix, is "
                          "singular") from None
    return reshape(out, tail + head)


def tensorsolve(A, B, dims=None):  # noqa: N803
    """X with tensordot(A, X, X.ndim) = B; `dims` of A move to the end first."""
    from ember.ops.shape import movedim, reshape

    op = "linalg.tensorsolve"
    check_float(op, A._data.dtype)
    check_float(op, B._data.dtype)
    refuse_mixed(op, ("A", "B"), A, B)
    if dims is not None:
        dims = [norm_dim(op, d, A.ndim) for d in ((dims,) if isinstance(dims, int) else dims)]
        A = movedim(A, tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))
    if B.ndim > A.ndim:
        raise ShapeError(f"{op}: B {fmt_shape(B.shape)} has more dimensions than A {fmt_shape(A.shape)}")
    out_shape = tuple(A.shape[B.ndim:])
    size = _prod(B.shape)
    if _prod(out_shape) != size or _prod(A.shape[:B.ndim]) != size:
        raise ShapeError(f"{op}: A {fmt_shape(A.shape)} does not make a square system with B {fmt_shape(B.shape)}: "
                         f"prod(A.shape[:B.ndim]), prod(A.shape[B.ndim:]) and B.numel() must agree")
    try:
        x = solve(reshape(A, (size, size)), reshape(B, (size,)))
    except LinAlgError:
        raise LinAlgError(f"{op}: A of shape {fmt_shape(A.shape)}, as a {size} x {size} matrix, is singular") from None
    return reshape(x, out_shape)


def householder_product(A, tau):  # noqa: N803
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i column i of A below a unit diagonal."""
    from ember.ops.creation_ops import eye_like
    from ember.ops.elementwise_composed import with_zero_gradient_to
    from ember.ops.shape import narrow, tril, unsqueeze

    op = "linalg.householder_product"
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {fmt_shape(A.shape)}")
    check_float(op, A._data.dtype)
    check_float(op, tau._data.dtype)
    refuse_mixed(op, ("A", "tau"), A, tau)
    m, n = A.shape[-2:]
    if m < n:
        raise ShapeError(f"{op}: A {fmt_shape(A.shape)} needs at least as many rows as columns")
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tau.shape[-1] > n:
        raise ShapeError(f"{op}: tau {fmt_shape(tau.shape)} must have A's batch dims {fmt_shape(A.shape[:-2])} and "
                         f"at most {n} values per matrix")
    eye = eye_like(A, m)
    v = tril(A, -1) + narrow(eye, -1, 0, n)
    q = eye.expand(*A.shape[:-2], m, m)
    if tau.shape[-1] == 0:  # no reflectors: the identity's columns, still a function of A (a zero gradient)
        return with_zero_gradient_to(narrow(q, -1, 0, n), A)
    for i in range(tau.shape[-1]):  # Q H_i = Q - tau_i (Q v_i) v_i^T
        vi = narrow(v, -1, i, 1)
        q = q - _mm(_mm(q, vi) * unsqueeze(narrow(tau, -1, i, 1), -1), _mT(vi))
    return narrow(q, -1, 0, n)

