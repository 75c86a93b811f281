"""PyTorch's top-level linear-algebra functions and their Tensor methods (`torch.svd`, `torch.qr`, `torch.lu`,
`torch.cholesky_solve`, `torch.triangular_solve`, `torch.matrix_power`, ...): the older forms, still in programs,
with their argument orders and results (svd's V rather than Vh, lu's packed factors, triangular_solve's pair), each
composed of the `linalg` ops so gradients come from them."""

from __future__ import annotations

from collections import namedtuple

from ember.errors import ShapeError, fmt_shape
from ember.ops.creation_ops import eye_like
from ember.ops.elementwise_composed import with_zero_gradient_to
from ember.ops.linalg import matmul
from ember.ops.linalg_decomp import _mT, inv, svdvals
from ember.ops.linalg_decomp import cholesky as _cholesky
from ember.ops.linalg_decomp import qr as _qr
from ember.ops.linalg_decomp import svd as _svd
from ember.ops.linalg_lu import lu_factor_ex, solve_triangular, unpack
from ember.ops.linalg_lu import lu_solve as _lu_solve

SVDLegacy = namedtuple("svd", ["U", "S", "V"])
QRLegacy = namedtuple("qr", ["Q", "R"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])


def matrix_power(A, n: int):  # noqa: N803 - PyTorch's names
    """A @ A @ ... (n times) for square matrices (batched); n = 0 gives the identity, n < 0 powers of the inverse."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.matrix_power: expected square matrices, got shape {fmt_shape(A.shape)}")
    n = int(n)
    if n == 0:  # the identity, still a function of A (a zero gradient), as PyTorch's is
        return with_zero_gradient_to(eye_like(A, A.shape[-1]).expand(*A.shape), A)
    base, out = (inv(A) if n < 0 else A), None
    n = abs(n)
    while n:  # square and multiply: log2(n) products
        if n & 1:
            out = base if out is None else matmul(out, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return out


def chain_matmul(*matrices):
    """The product of 2-D matrices, left to right (torch.chain_matmul, before linalg.multi_dot)."""
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for k, m in enumerate(matrices):
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul: tensor {k} must be 2-D, got shape {fmt_shape(m.shape)}")
    out = matrices[0]
    for m in matrices[1:]:
        out = matmul(out, m)
    return out


def svd(input, some: bool = True, compute_uv: bool = True):
    """(U, S, V) with input = U diag(S) V^T (torch.svd: V, where linalg.svd gives Vh); without compute_uv, U and V
    are zeros of the full sizes, as PyTorch's."""
    if not compute_uv:
        batch, (m, n) = tuple(input.shape[:-2]), tuple(input.shape[-2:])
        return SVDLegacy(input.new_zeros(batch + (m, m)), svdvals(input), input.new_zeros(batch + (n, n)))
    u, s, vh = _svd(input, full_matrices=not some)
    return SVDLegacy(u, s, _mT(vh))


def qr(input, some: bool = True):
    """(Q, R), reduced unless some=False (torch.qr)."""
    return QRLegacy(*_qr(input, mode="reduced" if some else "complete"))


def cholesky(input, upper: bool = False):
    """The Cholesky factor, lower or (upper) upper (torch.cholesky)."""
    return _cholesky(input, upper=upper)


def cholesky_solve(B, L, upper: bool = False):  # noqa: N803
    """X with A X = B for A = L L^T (or U^T U with upper), from the factor (torch.cholesky_solve)."""
    if upper:
        return solve_triangular(L, solve_triangular(_mT(L), B, upper=False), upper=True)
    return solve_triangular(_mT(L), solve_triangular(L, B, upper=False), upper=True)


def cholesky_inverse(L, upper: bool = False):  # noqa: N803
    """The inverse of A = L L^T (or U^T U with upper), from the factor (torch.cholesky_inverse)."""
    return cholesky_solve(eye_like(L, L.shape[-1]).expand(*L.shape), L, upper)


def lu(A, pivot: bool = True, get_infos: bool = False):  # noqa: N803
    """(LU, pivots), with infos too where get_infos: the packed factorisation (torch.lu)."""
    factored = lu_factor_ex(A, pivot=pivot)
    return tuple(factored) if get_infos else (factored.LU, factored.pivots)


def lu_solve(b, LU_data, LU_pivots):  # noqa: N803
    """X with A X = b from lu's packed factorisation (torch.lu_solve's argument order)."""
    return _lu_solve(LU_data, LU_pivots, b)


def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True):  # noqa: N803
    """(P, L, U) of lu's packed factorisation (torch.lu_unpack); parts not asked for are empty tensors."""
    p, low, up = unpack(LU_data, LU_pivots)
    empty = LU_data.new_empty((0,))
    return LUUnpackResult(p if unpack_pivots else empty, low if unpack_data else empty, up if unpack_data else empty)


def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):  # noqa: N803
    """(X, A's copy) with op(A) X = b for triangular A, op the transpose where asked (torch.triangular_solve)."""
    coefficient = A.clone()
    if transpose:
        return TriangularSolveResult(solve_triangular(_mT(A), b, upper=not upper, unitriangular=unitriangular),
                                     coefficient)
    return TriangularSolveResult(solve_triangular(A, b, upper=upper, unitriangular=unitriangular), coefficient)
