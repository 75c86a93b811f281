"""Norms for `ember.linalg`: vector_norm (an op, with PyTorch's gradients at zero and at ties), and matrix_norm
and norm built from it, the singular values and reductions.

float16/bfloat16 norms accumulate in float32 and are rounded once, as every reduction.
"""

from __future__ import annotations

import math

import numpy as np

from ember import dtypes as dt
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import norm_dims, spec
from ember.ops.linalg_decomp import check_float, svdvals
from ember.ops.opmath import rounded, upcast
from ember.ops.reduction import reduced_shape, unreduce

_INF = math.inf


def _check_ord(op: str, ord) -> float:  # noqa: A002 - PyTorch's name
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: ord must be a number (for 'fro' or 'nuc' use linalg.matrix_norm), got {ord!r}")
    return float(ord)


class VectorNormOp(Op):
    name = "linalg.vector_norm"
    save_inputs = (0,)
    save_outputs = (0,)

    def _dims(self, x, ord, dim):  # noqa: A002
        check_float(self.name, x.dtype)
        dims = norm_dims(self.name, dim, len(x.shape))
        if ord in (_INF, -_INF) and any(x.shape[d] == 0 for d in dims):
            raise ShapeError(f"{self.name}: the {ord} norm of an empty slice of shape {fmt_shape(x.shape)} has no "
                             "value (the reduction has no identity)")
        return dims

    def infer(self, x, ord=2.0, dim=None, keepdim=False):  # noqa: A002
        dims = self._dims(x, ord, dim)
        return spec(reduced_shape(x.shape, dims, keepdim), x.dtype)

    def kernel(self, xp, x, ord=2.0, dim=None, keepdim=False):  # noqa: A002
        axes = self._dims(x, ord, dim)
        a = xp.abs(upcast(x))
        if ord == _INF:
            r = a.max(axis=axes, keepdims=keepdim)
        elif ord == -_INF:
            r = a.min(axis=axes, keepdims=keepdim)
        elif ord == 0:
            r = (a != 0).sum(axis=axes, keepdims=keepdim).astype(a.dtype)
        elif ord == 1:
            r = a.sum(axis=axes, keepdims=keepdim)
        elif ord == 2:
            r = xp.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
        else:
            with np.errstate(divide="ignore", over="ignore"):  # 0 ** negative is inf: the norm is 0, quietly
                r = (a**ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)
        return rounded(xp.asarray(r), x.dtype)

    def vjp(self, ctx, g):
        from ember.ops.elementwise import abs as _abs
        from ember.ops.elementwise import eq, pow, sign, where
        from ember.ops.reduction import sum as _sum

        ord, keepdim = ctx.attrs.get("ord", 2.0), ctx.attrs.get("keepdim", False)  # noqa: A001
        if ord == 0:
            return (None,)  # a count: no gradient, as in PyTorch
        x, n = ctx.input(0), ctx.output
        shape = ctx.in_shape(0)
        dims = norm_dims(self.name, ctx.attrs.get("dim"), len(shape))
        g, n = unreduce(g, shape, dims, keepdim), unreduce(n, shape, dims, keepdim)
        if ord == 1:
            return (g * sign(x),)
        if ord == 2:
            return (g * x / where(eq(n, 0), 1.0, n),)  # zero at a zero vector, as PyTorch
        if ord in (_INF, -_INF):
            hit = eq(_abs(x), n).to(x.dtype)  # ties share the gradient evenly, as PyTorch
            count = unreduce(_sum(hit, dims, True), shape, dims, True)
            return (g * sign(x) * hit / count,)
        ax = _abs(x)
        safe_x = where(eq(ax, 0), 1.0, ax)
        safe_n = where(eq(n, 0), 1.0, n)
        grad = g * sign(x) * pow(safe_x / safe_n, ord - 1)
        return (where(eq(ax, 0), 0.0, where(eq(n, 0), 0.0, grad)),)


_vector_norm_op = register(VectorNormOp())


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """The ord-norm of x over `dim` (all of x, flattened, when None): sum(|x|^ord)^(1/ord), max|x| for inf, ..."""
    if dtype is not None:
        x = x.to(dt.as_dtype(dtype))
    dim = tuple(dim) if isinstance(dim, list) else dim
    return apply(_vector_norm_op, x, ord=_check_ord("linalg.vector_norm", ord), dim=dim, keepdim=bool(keepdim))


def _matrix_dims(op: str, A, dim) -> tuple:
    check_float(op, A._data.dtype)
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {fmt_shape(A.shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{op}: dim must be a pair of dimensions, got {dim!r}")
    d0, d1 = norm_dims(op, (dim[0],), A.ndim)[0], norm_dims(op, (dim[1],), A.ndim)[0]
    if d0 == d1:
        raise ValueError(f"{op}: dim must name two different dimensions, got {dim!r}")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):  # noqa: A002
    """The matrix norm over the two dims `dim`: 'fro', 'nuc', 1, -1, 2, -2, inf or -inf (PyTorch's meanings)."""
    from ember.ops.elementwise import abs as _abs
    from ember.ops.reduction import amax, amin
    from ember.ops.reduction import sum as _sum
    from ember.ops.shape import movedim, squeeze, unsqueeze

    op = "linalg.matrix_norm"
    if dtype is not None:
        A = A.to(dt.as_dtype(dtype))
    d0, d1 = _matrix_dims(op, A, dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = _sum(s, -1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, _INF, -_INF):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)  # 1: largest column sum; inf: largest row sum
        sums = _sum(_abs(A), inner, True)
        out = (amax if ord > 0 else amin)(sums, outer, True)
        if not keepdim:
            out = squeeze(out, tuple(sorted((d0, d1))))
        return out
    raise ValueError(f"{op}: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """A vector norm (dim an int, or A 1-D) or a matrix norm (dim a pair, or A 2-D), as torch.linalg.norm chooses."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise ValueError(f"linalg.norm: dim must be an int or a pair, got {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ShapeError(f"linalg.norm: without dim, ord={ord!r} needs a 1-D or 2-D input, got shape {fmt_shape(A.shape)}")
