"""`ember.linalg`: PyTorch's `torch.linalg` namespace — norms, inverses, determinants, solves and decompositions.

Every function is differentiable (the ops live in `ember/ops/linalg_decomp.py`, `ember/ops/linalg_norms.py`,
`ember/ops/linalg_lu.py` and `ember/ops/linalg_extra.py`), works on batches of matrices, and raises `LinAlgError`
(a RuntimeError) for a matrix it cannot factor; the `*_ex` functions report it in `info` instead. Ember has no
complex dtype, so `eig` and `eigvals` (complex results) are absent, as are `ldl_factor`/`ldl_solve`.
"""

# helpers under private names, so dir(ember.linalg) lists torch.linalg's names and no others
from ember.errors import LinAlgError
from ember.ops.linalg import matmul
from ember.ops.linalg_decomp import (
    EighResult,
    LstsqResult,
    QRResult,
    SlogdetResult,
    SVDResult,
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    lstsq,
    pinv,
    qr,
    slogdet,
    solve,
    svd,
    svdvals,
)
from ember.ops.linalg_extra import (
    CholeskyExResult,
    cholesky_ex,
    cond,
    diagonal,
    householder_product,
    matrix_exp,
    matrix_rank,
    tensorinv,
    tensorsolve,
    vander,
)
from ember.ops.linalg_legacy import matrix_power
from ember.ops.linalg_lu import (
    InvExResult,
    LUFactorExResult,
    LUFactorResult,
    LUResult,
    SolveExResult,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    solve_ex,
    solve_triangular,
)
from ember.ops.linalg_norms import matrix_norm, norm, vector_norm


def multi_dot(tensors):
    """The product of a list of matrices (the first and last may be vectors), left to right."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def vecdot(x, y, *, dim: int = -1):
    """The dot product of x and y along `dim`, broadcasting the other dims."""
    from ember.ops.reduction import sum as _sum

    return _sum(x * y, dim)


def cross(input, other, *, dim: int = -1):
    """The cross product of 3-vectors along dim (the last by default), broadcasting the rest."""
    from ember.ops.linalg import cross as _cross

    return _cross(input, other, dim)


# exactly the public functions and result classes (torch.linalg's names), not the helpers imported above
__all__ = [
    "CholeskyExResult", "EighResult", "InvExResult", "LUFactorExResult", "LUFactorResult", "LUResult", "LinAlgError",
    "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "SolveExResult", "cholesky", "cholesky_ex", "cond",
    "cross", "det", "diagonal", "eigh", "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor",
    "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot",
    "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
    "tensorsolve", "vander", "vecdot", "vector_norm",
]
