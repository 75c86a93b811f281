"""Ordering and scans: sort, argsort, topk, cumsum, cumprod (float16/bfloat16 scans run in float32)."""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import ShapeError
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
        from ember.ops.shape import flip

        x, y = ctx.input(0), ctx.output
        if x.ndim == 0:
            return (g,)
        d = ctx.attrs["dim"]
        # d y_j / d x_i = y_j / x_i for j >= i (inputs without zeros).
        return (flip(cumsum(flip(g * y, (d,)), d), (d,)) / x,)


_cumprod_op = register(CumProdOp())


def cumprod(input, dim: int, *, dtype=None):
    """Running product along `dim` (gradient assumes no zeros in the input)."""
    if dtype is None:
        return apply(_cumprod_op, input, dim=dim)
    out = apply(_cumprod_op, input.to(dtype), dim=dim)
    return out if out.dtype is dtype else out.to(dtype)  # an integer dtype asked for is the result's, as in PyTorch
