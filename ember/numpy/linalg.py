"""`ember.numpy.linalg`: NumPy's linear algebra names and conventions (autograd.numpy.linalg) over `ember.linalg`.

Every function is differentiable and returns ndarrays; results with several parts are NumPy's named tuples
(`eigh(a).eigenvalues`, `svd(a).S`, ...). Integer inputs are computed in float64, as NumPy does.
"""

from __future__ import annotations

from collections import namedtuple

from ember import linalg as _la
from ember import ops as _ops
from ember.numpy import _as_tensor, _axis, _float_input, _public_functions, _returning_ndarrays

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])
LinAlgError = _la.LinAlgError


def norm(x, ord=None, axis=None, keepdims: bool = False):  # noqa: A002 - NumPy's name
    """A vector norm (x 1-D, or axis an int) or a matrix norm (x 2-D, or axis a pair), NumPy's orders."""
    t = _float_input(x)
    axis = _axis(axis)
    if axis is None:
        if ord is None:  # the 2-norm of everything (Frobenius for a matrix), kept as 1s with keepdims
            out = _la.vector_norm(t)
            return _ops.reshape(out, (1,) * t.ndim) if keepdims else out
        axis = tuple(range(t.ndim))
    if isinstance(axis, int) or len(axis) == 1:
        return _la.vector_norm(t, 2 if ord is None else ord, axis, keepdims)
    if len(axis) == 2:
        return _la.matrix_norm(t, "fro" if ord is None else ord, axis, keepdims)
    raise ValueError(f"linalg.norm: improper number of dimensions to norm ({len(axis)}); give axis for 1 or 2 of them")


def det(a):
    """The determinant of each square matrix in a."""
    return _la.det(_float_input(a))


def slogdet(a) -> SlogdetResult:
    """(sign, log|det|) of each square matrix in a."""
    return SlogdetResult(*_la.slogdet(_float_input(a)))


def inv(a):
    """The inverse of each square matrix in a."""
    return _la.inv(_float_input(a))


def solve(a, b):
    """x with a @ x = b, for a (stack of) square a and b a vector or a (stack of) matrices."""
    a, b = _float_input(a), _float_input(b)
    if a.dtype != b.dtype:  # NumPy promotes; ember.linalg wants one dtype
        a, b = a.double(), b.double()
    return _la.solve(a, b)


def cholesky(a, *, upper: bool = False):
    """The lower (or upper) Cholesky factor of each symmetric positive-definite matrix in a."""
    return _la.cholesky(_float_input(a), upper=upper)


def eigh(a, UPLO: str = "L") -> EighResult:  # noqa: N803 - NumPy's name
    """Eigenvalues (ascending) and eigenvectors of each symmetric matrix in a, read from its UPLO triangle."""
    return EighResult(*_la.eigh(_float_input(a), UPLO))


def eigvalsh(a, UPLO: str = "L"):  # noqa: N803
    """The eigenvalues (ascending) of each symmetric matrix in a."""
    return _la.eigvalsh(_float_input(a), UPLO)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """U, S (descending) and Vh with a = U diag(S) Vh, or only S with compute_uv=False."""
    t = _float_input(a)
    if not compute_uv:
        return _la.svdvals(t)
    return SVDResult(*_la.svd(t, full_matrices=full_matrices))


def qr(a, mode: str = "reduced"):
    """Q and R with a = QR ('reduced' or 'complete'), or R alone with mode='r'."""
    q, r = _la.qr(_float_input(a), mode=mode)
    return r if mode == "r" else QRResult(q, r)


def pinv(a, rcond=None, hermitian: bool = False):
    """The pseudo-inverse; singular values at most rcond (default 1e-15) times the largest count as zero."""
    return _la.pinv(_float_input(a), rtol=1e-15 if rcond is None else rcond, hermitian=hermitian)


def lstsq(a, b, rcond=None) -> tuple:
    """(x, residuals, rank, singular values) of the least-squares problem a @ x = b, as NumPy reports them.

    The residuals (squared, per column of b; shape (1,) for a 1-D b) are empty when a is not
    full rank or has no more rows than columns; the rank is a Python int.
    """
    a, b = _float_input(a), _float_input(b)
    vector = b.ndim == 1
    res = _la.lstsq(a, _ops.unsqueeze(b, -1) if vector else b, rcond, driver="gelsd")
    x = _ops.squeeze(res.solution, -1) if vector else res.solution
    return x, res.residuals, int(res.rank.item()), res.singular_values


def matrix_power(a, n: int):
    """a multiplied by itself n times (n < 0 uses the inverse; n = 0 gives the identity)."""
    t = _as_tensor(a)
    if n < 0:
        t, n = inv(t), -n
    if n == 0:
        from ember.ops.creation_ops import eye_like

        return _ops.expand(eye_like(t, t.shape[-1]), tuple(t.shape))
    out = t
    for _ in range(n - 1):
        out = _ops.matmul(out, t)
    return out


def multi_dot(arrays):
    """The product of a list of matrices (the first and last may be vectors)."""
    return _la.multi_dot([_as_tensor(x) for x in arrays])


# Every public function returns ndarrays (see ember.numpy).
for _name in _public_functions(globals(), __name__):
    globals()[_name] = _returning_ndarrays(globals()[_name])
del _name
