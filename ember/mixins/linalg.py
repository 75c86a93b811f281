"""Matrix product and inverse/determinant methods (x.mm(y) is ember.mm(x, y), x.det() is ember.det(x))."""

from __future__ import annotations

from ember import ops
from ember.mixins.op_method import op_method


class LinalgMixin:
    """Matrix product and inverse/determinant methods of `ember.Tensor`."""

    __slots__ = ()

    matmul = op_method()
    mm = op_method()
    bmm = op_method()
    dot = op_method()
    mv = op_method()
    outer = op_method()
    inner = op_method()
    vdot = op_method()
    addmm = op_method()
    addmv = op_method()
    addr = op_method()
    baddbmm = op_method()
    addbmm = op_method()
    dist = op_method()
    trace = op_method()

    def inverse(self):
        """`ember.inverse(self)`."""
        return ops.inverse(self)

    def det(self):
        """`ember.det(self)`."""
        return ops.det(self)

    def logdet(self):
        """`ember.logdet(self)`."""
        return ops.logdet(self)

    def slogdet(self):
        """`ember.slogdet(self)`."""
        return ops.slogdet(self)

    pinverse = op_method()
    svd = op_method()
    qr = op_method()
    cholesky = op_method()
    matrix_exp = op_method()
    matrix_power = op_method()
    cholesky_solve = op_method()
    cholesky_inverse = op_method()
    triangular_solve = op_method()
    lu_solve = op_method()

    def lu(self, pivot: bool = True, get_infos: bool = False):
        """`ember.lu(self, ...)`: the packed factorisation (LU, pivots[, infos])."""
        return ops.lu(self, pivot, get_infos)
