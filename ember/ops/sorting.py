"""Ordering and scans: sort, argsort, topk, cumsum, cumprod, cummax, cummin, logcumsumexp (float16/bfloat16 scans
run in float32)."""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import DtypeError, ShapeError
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, INT64_NP, norm_dim, spec
from ember.ops.opmath import opmath, rounded, upcast


def _scatter_back(ctx, g, dim):
    """Gradient of a gather-by-indices op: put g back at the saved indices."""
    from ember.ops.creation_ops import zeros_like_shape
    from ember.ops.indexing import scatter_add

    shape = ctx.in_shape(0)
    if not shape:
        return g
    return scatter_add(zeros_like_shape(g, shape), dim, ctx.output_at(1), g)


def ascending_order(xp, x, d: int):
    """Stable ascending argsort along d, with NaN last."""
    # bfloat16 is sorted as float32 (exactly the same values): ml_dtypes' own sort misplaces NaN
    return xp.argsort(upcast(x), axis=d, kind="stable")


def descending_order(xp, x, d: int):
    """Stable descending argsort along d, with NaN first (PyTorch counts NaN as the largest value)."""
    # Integers and bools: ~x reverses the order without overflow (-x wraps for uint8 and the minimum int).
    keys = -upcast(x) if x.dtype in FLOAT_NP else ~x
    idx = xp.argsort(keys, axis=d, kind="stable")
    if x.dtype in FLOAT_NP:
        nan = xp.isnan(x)
        if nan.any():  # -NaN sorts last: move the NaNs to the front, keeping both groups' order
            first = xp.argsort(~xp.take_along_axis(nan, idx, axis=d), axis=d, kind="stable")
            idx = xp.take_along_axis(idx, first, axis=d)
    return idx


class SortOp(Op):
    name = "sort"
    fresh_output = True
    n_outputs = 2
    save_outputs = (1,)

    def infer(self, x, dim=-1, descending=False, stable=False):
        norm_dim(self.name, dim, len(x.shape))
        return spec(x.shape, x.dtype), spec(x.shape, INT64_NP)

    def kernel(self, xp, x, dim=-1, descending=False, stable=False):
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        d = norm_dim(self.name, dim, x.ndim)
        if descending:
            idx = descending_order(xp, x, d)
        else:
            idx = ascending_order(xp, x, d)
        return xp.take_along_axis(x, idx, axis=d), idx.astype(np.int64, copy=False)

    def vjp(self, ctx, g, _gi=None):
        return (_scatter_back(ctx, g, ctx.attrs.get("dim", -1)),)


_sort_op = register(SortOp())


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """(values, indices) sorted along `dim`."""
    from ember.ops.reduction import MaxMinResult

    v, i = apply(_sort_op, input, dim=dim, descending=descending, stable=stable)
    return MaxMinResult(v, i)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Indices that sort `input` along `dim`."""
    return sort(input, dim, descending, stable)[1]


def msort(input):
    """sort along dim 0, values only."""
    return sort(input, 0)[0]


class TopKOp(Op):
    name = "topk"
    fresh_output = True
    n_outputs = 2
    save_outputs = (1,)

    def _check(self, x, k, dim):
        nd = len(x.shape)
        d = norm_dim(self.name, dim, nd)
        size = x.shape[d] if nd else 1
        if size is not None and not 0 <= k <= size:
            raise ShapeError(f"topk: k={k} is out of range for dimension {dim} of size {size}")
        return d

    def infer(self, x, k, dim=-1, largest=True, sorted=True):
        d = self._check(x, k, dim)
        shape = list(x.shape)
        if shape:
            shape[d] = k
        return spec(tuple(shape), x.dtype), spec(tuple(shape), INT64_NP)

    def kernel(self, xp, x, k, dim=-1, largest=True, sorted=True):
        d = self._check(x, k, dim)
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        idx = descending_order(xp, x, d) if largest else ascending_order(xp, x, d)
        idx = xp.take(idx, xp.arange(k), axis=d)
        return xp.take_along_axis(x, idx, axis=d), idx.astype(np.int64, copy=False)

    def vjp(self, ctx, g, _gi=None):
        return (_scatter_back(ctx, g, ctx.attrs.get("dim", -1)),)


_topk_op = register(TopKOp())


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(values, indices) of the k largest (or smallest) elements along `dim`."""
    from ember.ops.reduction import MaxMinResult

    v, i = apply(_topk_op, input, k=int(k), dim=dim, largest=largest, sorted=sorted)
    return MaxMinResult(v, i)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """(value, index) of the k-th smallest element along `dim`."""
    from ember.ops.reduction import MaxMinResult
    from ember.ops.shape import narrow, squeeze

    v, i = topk(input, k, dim, largest=False)
    v, i = narrow(v, dim, k - 1, 1), narrow(i, dim, k - 1, 1)
    if not keepdim:
        v, i = squeeze(v, dim), squeeze(i, dim)
    return MaxMinResult(v, i)


class CumSumOp(Op):
    name = "cumsum"
    fresh_output = True

    def _dtype(self, dtype):
        return dtype if dtype in FLOAT_NP else INT64_NP

    def infer(self, x, dim):
        norm_dim(self.name, dim, len(x.shape))
        return spec(x.shape, self._dtype(x.dtype))

    def kernel(self, xp, x, dim):
        dtype = self._dtype(x.dtype)
        if x.ndim == 0:
            return x.astype(dtype)
        # float16/bfloat16 running sums are kept in float32, each rounded once
        return rounded(xp.cumsum(upcast(x), axis=norm_dim(self.name, dim, x.ndim), dtype=opmath(dtype)), dtype)

    def vjp(self, ctx, g):
        from ember.ops.shape import flip

        if not ctx.in_shape(0):
            return (g,)
        d = ctx.attrs["dim"]
        return (flip(cumsum(flip(g, (d,)), d), (d,)),)


_cumsum_op = register(CumSumOp())


def cumsum(input, dim: int, *, dtype=None, axis=None):
    """Running sum along `dim`."""
    if axis is not None:
        dim = axis
    if dtype is None:
        return apply(_cumsum_op, input, dim=dim)
    out = apply(_cumsum_op, input.to(dtype), dim=dim)
    return out if out.dtype is dtype else out.to(dtype)  # an integer dtype asked for is the result's, as in PyTorch


class CumProdOp(Op):
    name = "cumprod"
    fresh_output = True
    save_inputs = (0,)
    save_outputs = (0,)

    def infer(self, x, dim):
        norm_dim(self.name, dim, len(x.shape))
        return spec(x.shape, x.dtype if x.dtype in FLOAT_NP else INT64_NP)

    def kernel(self, xp, x, dim):
        dtype = x.dtype if x.dtype in FLOAT_NP else np.dtype(np.int64)
        if x.ndim == 0:  # the infer rule's dtype (int64 for integers and bools), as PyTorch gives
            return x.astype(dtype)
        return rounded(xp.cumprod(upcast(x), axis=norm_dim(self.name, dim, x.ndim), dtype=opmath(dtype)), dtype)

    def vjp(self, ctx, g):
        from ember.ops.elementwise import where
        from ember.ops.shape import flip

        x = ctx.input(0)
        if x.ndim == 0:
            return (g,)
        d = ctx.attrs["dim"]

        def from_the_end(z):  # sum over j >= i
            return flip(cumsum(flip(z, (d,)), d), (d,))

        # d y_j / d x_i = the product of x_m for m <= j but i. With zeros replaced by 1 (x1, its running product
        # p1) and c_j the number of zeros up to j, that is p1_j / x1_i where no other zero is among them: c_j == 0
        # for a non-zero x_i, c_j == 1 for a zero one (the first); else 0. Dividing y_j by x_i gave NaN at zeros.
        # Terms whose product holds exactly one zero x_k (other than x_i) are 0 but not their derivative by x_k: they
        # are written as x_k times the rest, so the gradient's own derivative is right (exact second derivatives).
        # Those are a non-zero x_i's terms between the first zero and the second, the first zero's terms between
        # the second zero and the third (times the second), and the second zero's there (times the first).
        from ember.ops.reduction import sum as _sum

        zero = x == 0
        x1 = where(zero, 1.0, x)
        weighted = g * cumprod(x1, d)
        zeros_so_far = cumsum(zero, d)
        none_yet = from_the_end(where(zeros_so_far == 0, weighted, 0.0))
        past_one = from_the_end(where(zeros_so_far == 1, weighted, 0.0))
        past_two = from_the_end(where(zeros_so_far == 2, weighted, 0.0))
        first_zero = _sum(where(zero & (zeros_so_far == 1), x, 0.0), d, True)  # its value, 0, as a function of x
        second_zero = _sum(where(zero & (zeros_so_far == 2), x, 0.0), d, True)
        at_zero = where(zeros_so_far == 1, past_one + second_zero * past_two,
                        where(zeros_so_far == 2, first_zero * past_two, 0.0))
        return (where(zero, at_zero, none_yet + first_zero * past_one) / x1,)


_cumprod_op = register(CumProdOp())


def cumprod(input, dim: int, *, dtype=None):
    """Running product along `dim` (its gradient exact at zeros too)."""
    if dtype is None:
        return apply(_cumprod_op, input, dim=dim)
    out = apply(_cumprod_op, input.to(dtype), dim=dim)
    return out if out.dtype is dtype else out.to(dtype)  # an integer dtype asked for is the result's, as in PyTorch


class CumExtremeOp(Op):
    """(values, indices) of the running max (or min) along `dim`: a NaN propagates and takes the index; a tie
    takes the later index, as PyTorch's cummax and cummin do."""

    fresh_output = True
    n_outputs = 2
    save_outputs = (1,)

    def __init__(self, name: str, ufunc) -> None:
        self.name, self.ufunc = name, ufunc

    def infer(self, x, dim):
        norm_dim(self.name, dim, max(len(x.shape), 1))
        return spec(x.shape, x.dtype), spec(x.shape, INT64_NP)

    def kernel(self, xp, x, dim):
        d = norm_dim(self.name, dim, max(x.ndim, 1))
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        values = self.ufunc.accumulate(x, axis=d)
        taken = values == x  # where the running value is this element (a later tie included)
        if x.dtype in FLOAT_NP:
            taken |= xp.isnan(x)
        positions = xp.arange(x.shape[d]).reshape((-1,) + (1,) * (x.ndim - 1 - d))
        return values, xp.maximum.accumulate(xp.where(taken, positions, 0), axis=d).astype(np.int64)

    def vjp(self, ctx, g, _gi=None):
        return (_scatter_back(ctx, g, ctx.attrs["dim"]),)


_cummax_op = register(CumExtremeOp("cummax", np.maximum))
_cummin_op = register(CumExtremeOp("cummin", np.minimum))


def cummax(input, dim: int):
    """(values, indices) of the running maximum along `dim`."""
    from ember.ops.reduction import MaxMinResult

    return MaxMinResult(*apply(_cummax_op, input, dim=dim))


def cummin(input, dim: int):
    """(values, indices) of the running minimum along `dim`."""
    from ember.ops.reduction import MaxMinResult

    return MaxMinResult(*apply(_cummin_op, input, dim=dim))


class LogCumSumExpOp(Op):
    """log(cumsum(exp(x))) along `dim`, accumulated pairwise in log space (no overflow, no underflow to -inf)."""

    name = "logcumsumexp"
    fresh_output = True
    save_inputs = (0,)
    save_outputs = (0,)

    def infer(self, x, dim):
        norm_dim(self.name, dim, max(len(x.shape), 1))
        if x.dtype not in FLOAT_NP:
            raise DtypeError(f"logcumsumexp: input must be floating point, got {np.dtype(x.dtype).name}")
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, dim):
        self.infer(x, dim)
        if x.ndim == 0:
            return x.copy()
        return rounded(xp.logaddexp.accumulate(upcast(x), axis=norm_dim(self.name, dim, x.ndim)), x.dtype)

    def vjp(self, ctx, g):
        # d out_j / d x_i = exp(x_i - out_j) for i <= j, so the gradient is exp(x_i) times a reversed sum of
        # g_j exp(-out_j): summed in log space, the positive and negative parts of g apart (PyTorch's way)
        from ember.ops.elementwise import exp, log, where
        from ember.ops.shape import flip

        d = ctx.attrs["dim"]
        if not ctx.in_shape(0):
            return (g,)
        x, out = ctx.input(0), ctx.output_at(0)

        def reversed_scan(z):
            return flip(logcumsumexp(flip(z, (d,)), d), (d,))

        # an absent part is the dtype's lowest finite value, not -inf: -inf - out and its gradients would be NaN
        from ember.type_info import finfo

        lowest = finfo(g.dtype).min
        pos = where(g > 0, log(where(g > 0, g, 1.0)), lowest)
        neg = where(g < 0, log(where(g < 0, -g, 1.0)), lowest)
        return (exp(x + reversed_scan(pos - out)) - exp(x + reversed_scan(neg - out)),)


_logcumsumexp_op = register(LogCumSumExpOp())


def logcumsumexp(input, dim: int):
    """log(cumsum(exp(input))) along `dim`, without overflow."""
    return apply(_logcumsumexp_op, input, dim=dim)
