"""The standard's linalg extension, over `ember.linalg` (keyword names and defaults as the standard has them)."""

from __future__ import annotations

from typing import NamedTuple

from ember import creation, linalg, ops
from ember.array_api._helpers import check_array, norm_axes, promote_pair
from ember.array_api._linalg_main import matmul, matrix_transpose, tensordot, vecdot
from ember.tensor import Tensor

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power",
    "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
    "trace", "vecdot", "vector_norm",
]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of symmetric positive-definite matrices."""
    return linalg.cholesky(check_array("linalg.cholesky", x), upper=upper)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along axis, broadcast over the other axes."""
    x1, x2 = promote_pair("linalg.cross", check_array("linalg.cross", x1), check_array("linalg.cross", x2))
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"array_api.linalg.cross: axis {axis} must have size 3, got shapes {tuple(x1.shape)}, "
                         f"{tuple(x2.shape)}")
    x1, x2 = ops.broadcast_tensors(x1, x2)
    a, b = ops.unbind(x1, axis), ops.unbind(x2, axis)
    out = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return ops.stack(out, axis)


def det(x, /):
    """The determinant of each matrix."""
    return linalg.det(check_array("linalg.det", x))


def diagonal(x, /, *, offset=0):
    """The offset-th diagonal of the last two axes."""
    return ops.diagonal(check_array("linalg.diagonal", x), offset, -2, -1)


def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices."""
    r = linalg.eigh(check_array("linalg.eigh", x))
    return EighResult(r.eigenvalues, r.eigenvectors)


def eigvalsh(x, /):
    """Eigenvalues (ascending) of symmetric matrices."""
    return linalg.eigvalsh(check_array("linalg.eigvalsh", x))


def inv(x, /):
    """The inverse of each square matrix."""
    return linalg.inv(check_array("linalg.inv", x))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm ('fro', 'nuc', inf, -inf, 1, -1, 2, -2) over the last two axes."""
    return linalg.matrix_norm(check_array("linalg.matrix_norm", x), ord=ord, dim=(-2, -1), keepdim=keepdims)


def matrix_power(x, n, /):
    """x multiplied by itself n times (n < 0 uses the inverse)."""
    check_array("linalg.matrix_power", x)
    if n == 0:
        return ops.broadcast_to(creation.eye(x.shape[-1], dtype=x.dtype, device=x.device), x.shape).clone()
    base = inv(x) if n < 0 else x
    out, p, n = None, base, abs(n)
    while n:  # repeated squaring
        if n & 1:
            out = p if out is None else ops.matmul(out, p)
        n >>= 1
        if n:
            p = ops.matmul(p, p)
    return out


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above rtol * the largest (rtol defaults to eps * max(M, N))."""
    s = svdvals(check_array("linalg.matrix_rank", x))
    if rtol is None:
        import numpy as np

        rtol = float(np.finfo(x.dtype.np).eps) * max(x.shape[-2], x.shape[-1])
    if isinstance(rtol, Tensor):
        rtol = ops.unsqueeze(rtol, -1)
    tol = ops.amax(s, dim=-1, keepdim=True) * rtol if s.shape[-1] else s
    return ops.sum(s > tol, dim=-1)


def outer(x1, x2, /):
    """The outer product of two 1-d arrays."""
    return ops.outer(*promote_pair("linalg.outer", check_array("linalg.outer", x1), check_array("linalg.outer", x2)))


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse."""
    check_array("linalg.pinv", x)
    if isinstance(rtol, Tensor):  # one rtol per matrix of the stack: broadcast against the singular values
        rtol = rtol.numpy(force=True)[..., None]
    return linalg.pinv(x, rtol=rtol)


def qr(x, /, *, mode="reduced"):
    """The QR factorisation ('reduced' or 'complete')."""
    r = linalg.qr(check_array("linalg.qr", x), mode=mode)
    return QRResult(r.Q, r.R)


def slogdet(x, /):
    """The sign and the log of the absolute value of each determinant."""
    r = linalg.slogdet(check_array("linalg.slogdet", x))
    return SlogdetResult(r.sign, r.logabsdet)


def solve(x1, x2, /):
    """The solution of x1 @ X = x2 (x2 a vector when 1-d)."""
    x1, x2 = promote_pair("linalg.solve", check_array("linalg.solve", x1), check_array("linalg.solve", x2))
    return linalg.solve(x1, x2)


def svd(x, /, *, full_matrices=True):
    """U, S, Vh with x = U @ diag(S) @ Vh."""
    r = linalg.svd(check_array("linalg.svd", x), full_matrices=full_matrices)
    return SVDResult(r.U, r.S, r.Vh)


def svdvals(x, /):
    """The singular values, descending."""
    return linalg.svdvals(check_array("linalg.svdvals", x))


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the offset-th diagonal of the last two axes."""
    from ember.array_api._statistical import sum as _sum

    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm over axis (all axes when None)."""
    check_array("linalg.vector_norm", x)
    axes = norm_axes("linalg.vector_norm", axis, x.ndim)
    if not x.ndim:
        return ops.abs(x) if ord != 0 else (x != 0).to(x.dtype)
    return linalg.vector_norm(x, ord=ord, dim=axes, keepdim=keepdims)
