"""Reductions over dims: sum, mean, prod, max/min (with indices), arg*, var/std, logsumexp, all/any."""

from __future__ import annotations

import builtins
from functools import partial

import numpy as np

from ember.dispatch import apply, apply_unary, unary_path
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.kernels import batch_norm, elementwise
from ember.kernels.numba_loader import MIN_ELEMENTS
from ember.op import Op, register
from ember.ops._rules import BOOL_NP, FLOAT_NP, INT64_NP, norm_dims, require_float, spec
from ember.ops.opmath import FLOAT32_NP, LOW_FLOAT_NP, opmath, rounded, upcast, upcast_tensor
from ember.ops.shape import expand, reshape


def reduced_shape(shape, dims, keepdim):
    """The shape left after reducing `dims` (kept as 1s with keepdim)."""
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


def unreduce(g, in_shape, dims, keepdim):
    """Broadcast a reduced gradient back to the input's shape."""
    if not keepdim and dims and len(dims) < len(in_shape):  # a full reduction's 0-d result broadcasts as it is
        g = reshape(g, reduced_shape(in_shape, dims, True))
    return expand(g, in_shape)


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


class Reduction(Op):
    """Shared rule: normalise dims, compute the reduced shape; subclasses choose the dtype."""

    def _dims(self, x, dim):
        return norm_dims(self.name, dim, len(x.shape))

    def out_dtype(self, dtype, **attrs):
        return dtype

    def infer(self, x, dim=None, keepdim=False, **attrs):
        dims = self._dims(x, dim)
        self._check_nonempty(x, dims)
        return spec(reduced_shape(x.shape, dims, keepdim), self.out_dtype(x.dtype, **attrs))

    def _check_nonempty(self, x, dims):
        pass

    def axis(self, x, dim):
        dims = self._dims(x, dim)
        return dims


_add_reduce = np.add.reduce  # (looked up once: x.sum() runs on every small loss)
_SELF_SUMMED = frozenset((np.dtype(np.float32), np.dtype(np.float64)))  # dtypes NumPy sums in themselves, as SumOp does


class SumOp(Reduction):
    name = "sum"
    fresh_output = True

    def out_dtype(self, dtype, dtype_out=None):
        if dtype_out is not None:
            return dtype_out
        return dtype if dtype in FLOAT_NP else INT64_NP

    def kernel(self, xp, x, dim=None, keepdim=False, dtype_out=None):
        if dim is None and dtype_out is None and xp is np and x.dtype in _SELF_SUMMED:  # x.sum(), the common call
            return np.asarray(_add_reduce(x, None, None, None, keepdim))
        out_dtype = self.out_dtype(x.dtype, dtype_out)
        axis = None if dim is None else self._dims(x, dim)
        if out_dtype in LOW_FLOAT_NP:  # accumulate in float32, round once
            acc = upcast(x) if x.dtype in FLOAT_NP else x.astype(FLOAT32_NP)
            return xp.asarray(rounded(acc.sum(axis=axis, keepdims=keepdim), out_dtype))
        if xp is np:  # ndarray.sum is np.add.reduce behind a Python wrapper (0.1-0.2 us a call)
            if axis is not None and out_dtype == x.dtype and x.size >= MIN_ELEMENTS:
                if axis == tuple(range(len(axis))):  # over leading dims (a linear layer's bias gradient)
                    out = elementwise.leading_sum(x, len(axis))
                    if out is not None:
                        return out.reshape((1,) * len(axis) + out.shape) if keepdim else out
                elif len(axis) > 1:  # per channel (a convolution's bias gradient)?
                    out = batch_norm.channel_sum(xp, x, axis, keepdim)
                    if out is not None:
                        return out
            return np.asarray(np.add.reduce(x, axis, out_dtype, None, keepdim))
        return xp.asarray(x.sum(axis=axis, keepdims=keepdim, dtype=out_dtype))

    def vjp(self, ctx, g):
        attrs = ctx.attrs
        dim = attrs.get("dim")
        if dim is None:  # x.sum(), the common call: its gradient broadcast back as it is (unreduce's answer)
            return (expand(g, tuple(ctx.in_meta[0][0])),)
        dims = norm_dims("sum", dim, len(ctx.in_shape(0)))
        return (unreduce(g, ctx.in_shape(0), dims, attrs.get("keepdim", False)),)


class MeanOp(Reduction):
    name = "mean"
    fresh_output = True

    def out_dtype(self, dtype, dtype_out=None):
        if dtype_out is not None:
            return dtype_out
        if dtype not in FLOAT_NP:
            raise DtypeError(
                f"mean: input dtype must be floating point, got {np.dtype(dtype).name}; cast with .float() first"
            )
        return dtype

    def kernel(self, xp, x, dim=None, keepdim=False, dtype_out=None):
        out_dtype = self.out_dtype(x.dtype, dtype_out)
        acc = opmath(out_dtype)
        axis = None if dim is None else self._dims(x, dim)
        if x.size == 0:  # NumPy warns "Mean of empty slice"; PyTorch quietly gives NaN
            n = _count(x.shape, self._dims(x, dim))
            with np.errstate(invalid="ignore", divide="ignore"):
                return xp.asarray(rounded(x.sum(axis=axis, keepdims=keepdim, dtype=acc) / acc.type(n), out_dtype))
        return xp.asarray(rounded(upcast(x).mean(axis=axis, keepdims=keepdim, dtype=acc), out_dtype))

    def vjp(self, ctx, g):
        shape = ctx.in_shape(0)
        dims = norm_dims("mean", ctx.attrs.get("dim"), len(shape))
        return (unreduce(g, shape, dims, ctx.attrs.get("keepdim", False)) / float(builtins.max(_count(shape, dims), 1)),)


class ProdOp(Reduction):
    name = "prod"
    fresh_output = True
    save_inputs = (0,)

    def out_dtype(self, dtype, dtype_out=None):
        if dtype_out is not None:
            return dtype_out
        return dtype if dtype in FLOAT_NP else INT64_NP

    def kernel(self, xp, x, dim=None, keepdim=False, dtype_out=None):
        out_dtype = self.out_dtype(x.dtype, dtype_out)
        acc = opmath(out_dtype)
        x = x.astype(acc) if acc != out_dtype and x.dtype != acc else x
        return xp.asarray(rounded(xp.prod(x, axis=self._dims(x, dim), keepdims=keepdim, dtype=acc), out_dtype))

    def vjp(self, ctx, g):
        x = ctx.input(0)
        dims = norm_dims("prod", ctx.attrs.get("dim"), x.ndim)
        g = unreduce(g, x.shape, dims, ctx.attrs.get("keepdim", False))
        return (g * apply(_prod_others_op, x, dims=dims),)


def _group_last(xp, x, dims):
    """x with the reduced dims moved last and flattened into one, and a function that undoes it."""
    keep = [d for d in range(x.ndim) if d not in dims]
    perm = keep + list(dims)
    xt = xp.transpose(x, perm)
    flat = xt.reshape(xt.shape[: len(keep)] + (_count(x.shape, dims),))  # not -1: sizes may be 0

    def restore(res):
        return xp.ascontiguousarray(xp.transpose(res.reshape(xt.shape), np.argsort(perm)))

    return flat, restore


def _exclusive_products(xp, flat):
    """Products of the elements before (left) and after (right) each position along the last axis."""
    if flat.shape[-1] == 0:
        return flat, flat
    ones = xp.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1)
    return left, right


class ProdOthersOp(Op):
    """For each element, the product of the other elements in its reduction group (zeros-safe)."""

    name = "prod_others"
    save_inputs = (0,)

    def infer(self, x, dims):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, dims):
        flat, restore = _group_last(xp, upcast(x), dims)
        left, right = _exclusive_products(xp, flat)
        return rounded(restore(left * right), x.dtype)

    def vjp(self, ctx, g):
        # Second derivatives of prod go through here (dividing by x would break at zeros).
        return (apply(_prod_others_vjp_op, ctx.input(0), g, dims=ctx.attrs["dims"]),)


_prod_others_op = register(ProdOthersOp())


class ProdOthersVjpOp(Op):
    """sum_{i != j} g_i * prod_{k not in (i, j)} x_k for each j of a group: prod_others' VJP, zeros-safe.

    With L_j, R_j the products of the elements before/after j, it is A_j R_j + B_j L_j, where
    A_j = sum_{i<j} g_i prod_{k<j, k!=i} x_k is built left to right (A_{j+1} = A_j x_j + g_j L_j)
    and B_j = sum_{i>j} g_i prod_{k>j, k!=i} x_k right to left.
    """

    name = "prod_others_vjp"

    def infer(self, x, g, dims):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, g, dims):
        dtype = x.dtype
        x, g = upcast(x), upcast(g)
        flat, restore = _group_last(xp, x, dims)
        gflat, _ = _group_last(xp, xp.broadcast_to(g, x.shape), dims)
        left, right = _exclusive_products(xp, flat)
        n = flat.shape[-1]
        a = xp.zeros_like(flat)
        b = xp.zeros_like(flat)
        for j in range(1, n):
            a[..., j] = a[..., j - 1] * flat[..., j - 1] + gflat[..., j - 1] * left[..., j - 1]
        for j in range(n - 2, -1, -1):
            b[..., j] = b[..., j + 1] * flat[..., j + 1] + gflat[..., j + 1] * right[..., j + 1]
        return rounded(restore(a * right + b * left), dtype)


_prod_others_vjp_op = register(ProdOthersVjpOp())


class _MaxMinAll(Reduction):
    """max/min/amax/amin as plain reductions; the gradient is shared evenly among ties."""

    fresh_output = True

    save_inputs = (0,)
    save_outputs = (0,)

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn

    def _check_nonempty(self, x, dims):
        for d in dims or range(len(x.shape)):
            if x.shape[d] == 0:
                raise ValueError(f"{self.name}: cannot reduce over an empty dimension of shape {fmt_shape(x.shape)}")
        if not dims and 0 in tuple(x.shape):
            raise ValueError(f"{self.name}: cannot reduce an empty tensor of shape {fmt_shape(x.shape)}")

    def kernel(self, xp, x, dim=None, keepdim=False):
        dims = self._dims(x, dim)
        self._check_nonempty(x, dims)
        return xp.asarray(getattr(xp, self.fn)(x, axis=dims, keepdims=keepdim))

    def vjp(self, ctx, g):
        from ember.ops.elementwise import eq

        x = ctx.input(0)
        dims = norm_dims(self.name, ctx.attrs.get("dim"), x.ndim)
        keep = ctx.attrs.get("keepdim", False)
        out = unreduce(ctx.output, x.shape, dims, keep)
        mask = eq(x, out).to(x.dtype)
        count = unreduce(_sum(mask, dims, True), x.shape, dims, True)
        return (unreduce(g, x.shape, dims, keep) * mask / count,)


def _plain_axis(xp, x, dim):
    """The non-negative axis of a NumPy array's reduction along one valid, non-empty `dim`: the common case, which
    needs none of the shape rule's checks; None for anything else (the rule then runs and names any error)."""
    nd = x.ndim
    if xp is np and nd and type(dim) is int and -nd <= dim < nd and x.shape[dim]:
        return dim % nd
    return None


class _MaxMinDim(Op):
    """max/min along one dim returning (values, indices), as PyTorch."""

    fresh_output = True

    n_outputs = 2
    save_outputs = (1,)

    def __init__(self, name, arg):
        self.name = name
        self.arg = arg

    def infer(self, x, dim, keepdim=False):
        d = norm_dims(self.name, dim, len(x.shape))
        if d and x.shape[d[0]] == 0:
            raise ValueError(f"{self.name}: cannot reduce over empty dimension {dim} of shape {fmt_shape(x.shape)}")
        shape = reduced_shape(x.shape, d, keepdim)
        return spec(shape, x.dtype), spec(shape, INT64_NP)

    def kernel(self, xp, x, dim, keepdim=False):
        axis = _plain_axis(xp, x, dim)
        if axis is not None:  # without the shape rule's checks and NumPy's Python wrappers (argmax, squeeze)
            idx = getattr(x, self.arg)(axis=axis, keepdims=True)
            vals = np.take_along_axis(x, idx, axis)
            if not keepdim:
                idx, vals = idx.squeeze(axis), vals.squeeze(axis)
            return vals, idx.astype(np.int64, copy=False)
        self.infer(x, dim, keepdim)
        d = norm_dims(self.name, dim, x.ndim)
        if not d:  # 0-d input
            return x.copy(), xp.zeros((), dtype=np.int64)
        axis = d[0]
        arg = getattr(xp, self.arg) if xp is np or x.dtype not in FLOAT_NP else partial(_first_nan_or, xp, self.arg)
        idx = arg(x, axis=axis, keepdims=True)
        vals = xp.take_along_axis(x, idx, axis=axis)
        if not keepdim:
            idx = xp.squeeze(idx, axis)
            vals = xp.squeeze(vals, axis)
        return vals, idx.astype(np.int64, copy=False)

    def vjp(self, ctx, g, _g_idx=None):
        from ember.ops.creation_ops import zeros_like_shape
        from ember.ops.indexing import scatter
        from ember.ops.shape import unsqueeze

        shape = ctx.in_shape(0)
        if not shape:
            return (g,)
        dim = norm_dims(self.name, ctx.attrs["dim"], len(shape))[0]
        idx = ctx.output_at(1)
        if not ctx.attrs.get("keepdim", False):
            g = unsqueeze(g, dim)
            idx = unsqueeze(idx, dim)
        return (scatter(zeros_like_shape(g, shape), dim, idx, g),)


class _ArgMaxMin(Op):
    fresh_output = True
    differentiable = False

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn

    def infer(self, x, dim=None, keepdim=False):
        if dim is None:
            if 0 in tuple(x.shape):
                raise ValueError(f"{self.name}: cannot reduce an empty tensor of shape {fmt_shape(x.shape)}")
            return spec((1,) * len(x.shape) if keepdim else (), INT64_NP)
        d = norm_dims(self.name, dim, len(x.shape))
        if d and x.shape[d[0]] == 0:
            raise ValueError(f"{self.name}: cannot reduce over empty dimension {dim} of shape {fmt_shape(x.shape)}")
        return spec(reduced_shape(x.shape, d, keepdim), INT64_NP)

    def kernel(self, xp, x, dim=None, keepdim=False):
        axis = _plain_axis(xp, x, dim)
        if axis is not None:  # without the shape rule's checks and NumPy's Python wrapper (the array's method)
            return getattr(x, self.fn)(axis=axis, keepdims=keepdim).astype(np.int64, copy=False)
        self.infer(x, dim, keepdim)
        fn = getattr(xp, self.fn) if xp is np or x.dtype not in FLOAT_NP else partial(_first_nan_or, xp, self.fn)
        if dim is None:
            r = fn(x.reshape(-1))
            return xp.asarray(r, dtype=np.int64).reshape((1,) * x.ndim if keepdim else ())
        d = norm_dims(self.name, dim, x.ndim)
        if not d:
            return xp.zeros((), dtype=np.int64)
        return xp.asarray(fn(x, axis=d[0], keepdims=keepdim), dtype=np.int64)


def _first_nan_or(xp, name: str, x, axis=None, keepdims=False):
    """argmax/argmin where a NaN wins at its first position, as in NumPy and PyTorch: CuPy's parallel reductions
    return whichever NaN they meet (the comparisons with NaN are all false)."""
    nan = xp.isnan(x)
    first_nan = xp.argmax(nan, axis=axis, keepdims=keepdims)
    return xp.where(nan.any(axis=axis, keepdims=keepdims), first_nan, getattr(xp, name)(x, axis=axis, keepdims=keepdims))


class VarOp(Reduction):
    name = "var"
    fresh_output = True
    save_inputs = (0,)

    def out_dtype(self, dtype, correction=1):
        if dtype not in FLOAT_NP:
            raise DtypeError(f"{self.name}: input dtype must be floating point, got {np.dtype(dtype).name}")
        return dtype

    def kernel(self, xp, x, dim=None, keepdim=False, correction=1):
        dtype = self.out_dtype(x.dtype)
        x = upcast(x)
        dims = self._dims(x, dim)
        n = _count(x.shape, dims)
        ddof = correction if n > correction else n  # NaN/inf like PyTorch when n <= correction
        with np.errstate(divide="ignore", invalid="ignore"):
            r = xp.var(x, axis=dims, keepdims=keepdim, ddof=ddof) if n > correction else (
                xp.sum((x - xp.mean(x, axis=dims, keepdims=True)) ** 2, axis=dims, keepdims=keepdim) / builtins.max(n - correction, 0)
            )
        return xp.asarray(rounded(xp.asarray(r), dtype))

    def vjp(self, ctx, g):
        x = ctx.input(0)
        dims = norm_dims("var", ctx.attrs.get("dim"), x.ndim)
        n = _count(x.shape, dims)
        corr = ctx.attrs.get("correction", 1)
        centered = x - _mean(x, dims, True)
        g = unreduce(g, x.shape, dims, ctx.attrs.get("keepdim", False))
        return (g * centered * (2.0 / builtins.max(n - corr, 1e-300)),)


class LogSumExpOp(Reduction):
    name = "logsumexp"
    fresh_output = True
    save_inputs = (0,)
    save_outputs = (0,)

    def out_dtype(self, dtype):
        return dtype if dtype in FLOAT_NP else np.dtype(np.float32)

    def kernel(self, xp, x, dim=None, keepdim=False):
        dims = self._dims(x, dim)
        dtype = self.out_dtype(x.dtype)
        x = upcast(x.astype(dtype, copy=False))
        if x.size == 0:
            return xp.asarray(xp.full(reduced_shape(x.shape, dims, keepdim), -np.inf, dtype=dtype))
        m = xp.max(x, axis=dims, keepdims=True)
        m = xp.where(xp.isinf(m), 0, m)  # PyTorch's rule: an infinite max is not subtracted
        with np.errstate(divide="ignore"):  # a slice of only -inf sums to 0: log gives -inf, as PyTorch
            s = xp.log(xp.sum(xp.exp(x - m), axis=dims, keepdims=True)) + m
        if not keepdim:
            s = s.reshape(reduced_shape(x.shape, dims, False))
        return xp.asarray(rounded(s, dtype))

    def vjp(self, ctx, g):
        from ember.ops.elementwise import exp

        x = ctx.input(0)
        dims = norm_dims("logsumexp", ctx.attrs.get("dim"), x.ndim)
        keep = ctx.attrs.get("keepdim", False)
        out = unreduce(ctx.output, x.shape, dims, keep)
        return (unreduce(g, x.shape, dims, keep) * exp(x - out),)


class _AllAny(Reduction):
    fresh_output = True
    differentiable = False

    def __init__(self, name):
        self.name = name

    def out_dtype(self, dtype):
        return BOOL_NP

    def kernel(self, xp, x, dim=None, keepdim=False):
        return xp.asarray(getattr(xp, self.name)(x, axis=self._dims(x, dim), keepdims=keepdim))


_sum_op = register(SumOp())
_sum_path = unary_path(_sum_op)
_mean_op = register(MeanOp())
_mean_path = unary_path(_mean_op)
_prod_op = register(ProdOp())
_prod_path = unary_path(_prod_op)
_var_op = register(VarOp())
_var_path = unary_path(_var_op)
_lse_op = register(LogSumExpOp())
_lse_path = unary_path(_lse_op)
from ember.op import register  # noqa: E402

_amax_op = register(_MaxMinAll("amax", "max"))
_amax_path = unary_path(_amax_op)
_amin_op = register(_MaxMinAll("amin", "min"))
_amin_path = unary_path(_amin_op)
_max_dim_op = register(_MaxMinDim("max_dim", "argmax"))
_min_dim_op = register(_MaxMinDim("min_dim", "argmin"))
_argmax_op = register(_ArgMaxMin("argmax", "argmax"))
_argmax_path = unary_path(_argmax_op)
_argmin_op = register(_ArgMaxMin("argmin", "argmin"))
_argmin_path = unary_path(_argmin_op)
_all_op = register(_AllAny("all"))
_all_path = unary_path(_all_op)
_any_op = register(_AllAny("any"))
_any_path = unary_path(_any_op)


def _dim_arg(dim, axis):
    if axis is not None:
        if dim is not None:
            raise TypeError("pass either dim or axis, not both")
        return axis
    return dim


def _norm_dim_attr(dim):
    if isinstance(dim, list):
        return tuple(dim)
    return dim


def _sum(x, dim, keepdim):
    return _sum_path(x, dim=dim, keepdim=keepdim)


def _mean(x, dim, keepdim):
    return _mean_path(x, dim=dim, keepdim=keepdim)


def sum(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    """Sum over `dim` (int, tuple, or all); ints and bools sum to int64."""
    if dim is None and axis is None and dtype is None and not keepdim and not keepdims:
        return _sum_path(input)  # the common full reduction, kept lean
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    keepdim = keepdim if keepdims is None else keepdims
    attrs = {"dim": dim, "keepdim": bool(keepdim)}
    if dtype is not None:
        from ember.dtypes import as_dtype

        attrs["dtype_out"] = as_dtype(dtype).np
    return _sum_path(input, **attrs)


def mean(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    """Mean over `dim`; the input must be floating point."""
    if dim is None and axis is None and dtype is None and not keepdim and not keepdims:
        return _mean_path(input)
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    keepdim = keepdim if keepdims is None else keepdims
    attrs = {"dim": dim, "keepdim": bool(keepdim)}
    if dtype is not None:
        from ember.dtypes import as_dtype

        input = input.to(as_dtype(dtype))
    return _mean_path(input, **attrs)


def prod(input, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
    """Product over `dim`."""
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    keepdim = keepdim if keepdims is None else keepdims
    attrs = {"dim": dim, "keepdim": bool(keepdim)}
    if dtype is not None:
        from ember.dtypes import as_dtype

        attrs["dtype_out"] = as_dtype(dtype).np
    return _prod_path(input, **attrs)


def _max_min(op_all, op_dim, input, dim, keepdim, other, axis, keepdims):
    from ember.tensor import Tensor

    if isinstance(dim, Tensor) and other is None:
        other, dim = dim, None
    if other is not None:
        from ember.ops.elementwise import maximum, minimum

        return maximum(input, other) if op_all is _amax_op else minimum(input, other)
    dim = _dim_arg(dim, axis)
    keepdim = keepdim if keepdims is None else keepdims
    if dim is None:
        return apply_unary(op_all, input, dim=None, keepdim=False)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op_dim.name[:3]}: dim must be an int (use amax/amin for several dims)")
    values, indices = apply(op_dim, input, dim=dim, keepdim=bool(keepdim))
    return MaxMinResult(values, indices)


class MaxMinResult(tuple):
    """(values, indices) with named fields, like PyTorch's return type."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def max(input, dim=None, keepdim: bool = False, *, other=None, axis=None, keepdims=None):
    """Largest value; with `dim`, (values, indices) along it; with a tensor, elementwise maximum."""
    return _max_min(_amax_op, _max_dim_op, input, dim, keepdim, other, axis, keepdims)


def min(input, dim=None, keepdim: bool = False, *, other=None, axis=None, keepdims=None):
    """Smallest value; with `dim`, (values, indices) along it; with a tensor, elementwise minimum."""
    return _max_min(_amin_op, _min_dim_op, input, dim, keepdim, other, axis, keepdims)


def amax(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """Largest values over `dim` (int or tuple); gradient shared among ties."""
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    return _amax_path(input, dim=dim, keepdim=bool(keepdim if keepdims is None else keepdims))


def amin(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """Smallest values over `dim` (int or tuple); gradient shared among ties."""
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    return _amin_path(input, dim=dim, keepdim=bool(keepdim if keepdims is None else keepdims))


def argmax(input, dim=None, keepdim: bool = False, *, axis=None):
    """Index of the largest value (flattened when dim is None)."""
    return _argmax_path(input, dim=_dim_arg(dim, axis), keepdim=bool(keepdim))


def argmin(input, dim=None, keepdim: bool = False, *, axis=None):
    """Index of the smallest value (flattened when dim is None)."""
    return _argmin_path(input, dim=_dim_arg(dim, axis), keepdim=bool(keepdim))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    if unbiased is None:
        return 1
    return 1 if unbiased else 0


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None, keepdims=None):
    """Variance over `dim` (Bessel-corrected by default, as PyTorch)."""
    if isinstance(dim, bool):  # var(x, False): the old positional `unbiased`
        dim, unbiased = None, dim
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    keepdim = keepdim if keepdims is None else keepdims
    return _var_path(input, dim=dim, keepdim=bool(keepdim), correction=_correction(unbiased, correction))


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, axis=None, keepdims=None):
    """Standard deviation over `dim`."""
    from ember.ops.elementwise import sqrt

    return sqrt(var(input, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims))


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(var, mean) over `dim`."""
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(std, mean) over `dim`."""
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """log(sum(exp(x))) over `dim`, computed stably."""
    dim = _norm_dim_attr(_dim_arg(dim, axis))
    return _lse_path(input, dim=dim, keepdim=bool(keepdim if keepdims is None else keepdims))


def all(input, dim=None, keepdim: bool = False, *, axis=None):
    """Whether every element is true."""
    return _all_path(input, dim=_norm_dim_attr(_dim_arg(dim, axis)), keepdim=bool(keepdim))


def any(input, dim=None, keepdim: bool = False, *, axis=None):
    """Whether any element is true."""
    return _any_path(input, dim=_norm_dim_attr(_dim_arg(dim, axis)), keepdim=bool(keepdim))


def equal(input, other) -> bool:
    """Whether two tensors have the same shape and the same values (one Python bool, as torch.equal).

    Values are compared after type promotion, and NaN equals nothing; `eq` compares elementwise.
    """
    from ember.ops.elementwise import eq
    from ember.tensor import Tensor

    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"equal: expected two tensors, got {type(input).__name__} and {type(other).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(all(eq(input, other)))


def norm(input, p=2, dim=None, keepdim: bool = False):
    """Vector p-norm over `dim` (p = 1, 2, inf or any positive number); float16/bfloat16 compute in float32."""
    require_float("norm", input.dtype.np)
    x = upcast_tensor(input)  # squares of float16 values above 256 would overflow
    out = _norm(x, p, dim, keepdim)
    return out if x is input else out.to(input.dtype)


def _norm(input, p, dim, keepdim):
    from ember.ops.elementwise import abs as _abs
    from ember.ops.elementwise import pow as _pow
    from ember.ops.elementwise import sqrt

    if p == 2 or p == "fro":
        return sqrt(sum(input * input, dim, keepdim))
    if p == 1:
        return sum(_abs(input), dim, keepdim)
    if p == float("inf"):
        return amax(_abs(input), dim, keepdim)
    if p == float("-inf"):
        return amin(_abs(input), dim, keepdim)
    if p == 0:  # the number of non-zero elements, in the input's dtype (no gradient, as in PyTorch)
        return sum(input != 0, dim, keepdim).to(input.dtype)
    return _pow(sum(_pow(_abs(input), p), dim, keepdim), 1.0 / p)


def count_nonzero(input, dim=None):
    """Number of non-zero elements over `dim`."""
    from ember.ops.elementwise import ne

    return sum(ne(input, 0), dim)


__all__ = [
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std", "var_mean",
    "std_mean", "logsumexp", "all", "any", "equal", "norm", "count_nonzero", "unreduce", "reduced_shape", "ShapeError",
    "BOOL_NP",
]
