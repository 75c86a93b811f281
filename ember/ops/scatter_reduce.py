"""Reductions into positions given by an index: scatter_reduce, index_reduce and segment_reduce.

These are what message passing on graphs needs: each edge's message is reduced (summed, averaged,
maxed) into its target node. scatter_reduce is the primitive; index_reduce and segment_reduce are
written with it, so their gradients (and second derivatives) come from its rule. The rule follows
PyTorch's: a mean divides by the count, amax/amin share the gradient evenly among the elements
equal to the result, and prod treats zeros exactly.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.kernels.row_reduce import reduce_into_rows, single_axis_rows
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, INT64_NP, norm_dim, spec
from ember.ops.creation_ops import _full_like_op
from ember.ops.indexing import (
    _along_dim_index,
    _bounds,
    _check_along,
    _check_index_tensor,
    device_ufunc_at,
    gather,
    scatter,
    scatter_add,
)
from ember.ops.opmath import rounded, upcast

REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNC = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _identity(reduce: str, dtype):
    """The value a reduction starts from (what include_self=False puts at the scattered positions)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype in FLOAT_NP:
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:  # bool
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


def _ufunc_at(xp, reduce: str, out, idx, values, rows=None, axis: int = 0) -> None:
    """out[idx] op= values, applying every repeated index (NumPy's ufunc.at, and CuPy's).

    `rows`: the 1-D index when idx only varies along `axis`, which a sort and a reduceat do much faster.
    """
    name = _UFUNC[reduce]
    if xp is np:
        if rows is not None:
            reduce_into_rows(getattr(np, name), out, rows, values, axis)
        else:
            getattr(np, name).at(out, idx, values)
        return
    if name == "multiply" or (name != "add" and out.dtype == np.float64):
        # CuPy has no scatter product, and its atomic scatter_max/min round float64 to float32
        reduce_at_sorted(xp, name, out, idx, values)
        return
    device_ufunc_at(xp, name, out, idx, values)


def reduce_at_sorted(xp, name: str, out, idx, values) -> None:
    """np.maximum.at / np.minimum.at / np.multiply.at (`name`) on any array module, by sorting instead of
    atomics. The values are sorted by target (then value): a maximum or minimum is its group's last or first
    value, a group holding a NaN gives NaN, as NumPy's ufunc.at and PyTorch do; a product is a segmented scan
    (log2 of the longest group's length passes), in another order than NumPy's, so equal within rounding."""
    shape = np.broadcast_shapes(*(tuple(i.shape) for i in idx), tuple(values.shape))
    target = xp.ravel_multi_index(tuple(xp.broadcast_to(i % n, shape) for i, n in zip(idx, out.shape)),
                                  out.shape).reshape(-1)
    vals = xp.broadcast_to(values, shape).reshape(-1)
    if target.size == 0:
        return
    if name == "multiply":
        order = xp.argsort(target, kind="stable")
    else:  # by target, then value (CuPy's lexsort takes one 2-D array)
        order = xp.lexsort(xp.stack([vals.astype(np.float64), target.astype(np.float64)]))  # exact to 2^53
    target, vals = target[order], vals[order]
    new = xp.ones(target.shape, dtype=bool)
    new[1:] = target[1:] != target[:-1]  # the first of each group
    ends = xp.ones(target.shape, dtype=bool)
    ends[:-1] = new[1:]  # the last of each group
    if name == "multiply":
        starts = xp.nonzero(new)[0]
        first = starts[xp.cumsum(new) - 1]  # each position's group start
        positions = xp.arange(target.size)
        step = 1
        while step < target.size:  # Hillis-Steele: after the pass, each value is the product of its last 2*step
            reach = positions[step:] - step >= first[step:]
            vals = xp.concatenate([vals[:step], xp.where(reach, vals[step:] * vals[:-step], vals[step:])])
            step *= 2
        pick = ends
    else:
        pick = ends if name == "maximum" else new
    pos = xp.unravel_index(target[pick], out.shape)
    out[pos] = getattr(xp, name)(out[pos], vals[pick])
    if name != "multiply":
        nan = xp.isnan(vals)
        if bool(nan.any()):
            out[xp.unravel_index(target[nan], out.shape)] = np.nan


def _check_reduce(op: str, reduce: str) -> None:
    if reduce not in REDUCES:
        raise ValueError(f"{op}: reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")


class ScatterReduceOp(Op):
    """out = self with src reduced into out[..., index[...], ...] along dim (repeated indices all count)."""

    name = "scatter_reduce"
    save_inputs = (0, 1, 2)
    save_outputs = (0,)

    def infer(self, x, index, src, dim, reduce, include_self=True, caller="scatter_reduce"):
        _check_reduce(caller, reduce)
        _check_index_tensor(caller, index)
        _check_along(caller, x, dim, index)
        if src.dtype != x.dtype:
            raise TypeError(f"{self.name}: expected self.dtype to be equal to src.dtype, got {np.dtype(x.dtype).name} "
                            f"and {np.dtype(src.dtype).name}")
        if len(src.shape) != len(index.shape):
            raise ShapeError(f"{self.name}: index {fmt_shape(index.shape)} and src {fmt_shape(src.shape)} must have "
                             "the same number of dimensions")
        for k in range(len(index.shape)):
            if src.shape[k] is not None and index.shape[k] is not None and index.shape[k] > src.shape[k]:
                raise ShapeError(f"{self.name}: index {fmt_shape(index.shape)} is larger than src "
                                 f"{fmt_shape(src.shape)} at dimension {k}")
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, index, src, dim, reduce, include_self=True, caller="scatter_reduce"):
        self.infer(x, index, src, dim, reduce, include_self, caller)
        d = norm_dim(caller, dim, x.ndim)
        _bounds(xp, caller, index, x.shape[d] if x.ndim else 1, d)
        idx = _along_dim_index(xp, index, d) if x.ndim else ()
        src = src[tuple(slice(0, s) for s in index.shape)]
        exact = reduce in ("amax", "amin")  # picks, not sums: no wider accumulator needed
        out = (x if exact else upcast(x)).copy()
        values = src if exact else upcast(src)
        rows = single_axis_rows(index, x.shape, d) if xp is np and x.ndim else None
        if not include_self:
            out[idx] = _identity(reduce, out.dtype)
        _ufunc_at(xp, reduce, out, idx, values, rows, d)
        if reduce == "mean":
            count = xp.full(x.shape, 1 if include_self else 0, dtype=np.int64)
            _ufunc_at(xp, "sum", count, idx, xp.ones(index.shape, dtype=np.int64), rows, d)
            hit = count > 0
            safe = xp.maximum(count, 1)
            mean = out // safe if out.dtype.kind in "iu" else out / safe.astype(out.dtype)
            out = xp.where(hit, mean, out)  # positions nothing was scattered to keep self
        return rounded(out, x.dtype) if out.dtype != x.dtype else out

    def vjp(self, ctx, g):
        x, index, src, out = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output
        dim, reduce, include_self = ctx.attrs["dim"], ctx.attrs["reduce"], ctx.attrs.get("include_self", True)
        src = _leading(src, tuple(index.shape))
        if reduce == "sum":
            g_self, g_src = g, gather(g, dim, index)
        elif reduce == "mean":
            count = scatter_add(_filled(g, x.shape, 1.0 if include_self else 0.0), dim, index, _filled(g, index.shape, 1.0))
            g_mean = g / count.clamp_min(1.0)
            g_self, g_src = g_mean, gather(g_mean, dim, index)
        elif reduce in ("amax", "amin"):
            # Every element equal to the result gets an equal share (PyTorch's rule at ties).
            self_eq = (x == out).to(g.dtype) if include_self else _filled(g, x.shape, 0.0)
            src_eq = (src == gather(out, dim, index)).to(g.dtype)
            share = g / scatter_add(self_eq, dim, index, src_eq).clamp_min(1.0)
            g_self, g_src = self_eq * share, src_eq * gather(share, dim, index)
        else:
            g_self, g_src = _prod_grads(g, x, index, src, out, dim, include_self)
        if not include_self:  # self passes through where nothing was scattered, and is replaced elsewhere
            g_self = g.masked_fill(scatter(_filled(g, x.shape, 0.0), dim, index, value=1.0) != 0, 0.0)
        if ctx.needs_grad(2) and tuple(g_src.shape) != ctx.in_shape(2):
            g_src = _pad_to(g_src, ctx.in_shape(2))
        return (g_self if ctx.needs_grad(0) else None), None, (g_src if ctx.needs_grad(2) else None)


_scatter_reduce_op = register(ScatterReduceOp())


def _prod_grads(g, x, index, src, out, dim, include_self):
    """Gradients of a scattered product, exact where factors are zero (PyTorch's formulation)."""
    from ember.ops.elementwise import where

    g_self = None
    if include_self:  # (without self, the caller passes g through the positions nothing was scattered to)
        masked_self = where(x == 0, 1.0, x)
        g_self = g * scatter_reduce(masked_self, dim, index, src, "prod") / masked_self
    src_zero = src == 0
    zeros = scatter_add(_filled(g, x.shape, 0.0), dim, index, src_zero.to(g.dtype))
    single_zero = src_zero & (gather(zeros, dim, index) == 1)  # the only zero among its position's factors
    masked_src = where(single_zero, 1.0, src)
    without_it = scatter_reduce(x, dim, index, masked_src, "prod", include_self=include_self)
    g_src = where(single_zero, gather(g * without_it, dim, index),
                  gather(g * out, dim, index) / where(src_zero, 1.0, src))
    return g_self, g_src


def _filled(like, shape, value):
    return apply(_full_like_op, like, value=value, shape=tuple(shape))


def _leading(t, shape: tuple):
    """t[:shape[0], :shape[1], ...]: the part of src that the index addresses."""
    if tuple(t.shape) == shape:
        return t
    return t[tuple(slice(0, s) for s in shape)]


def _pad_to(t, shape: tuple):
    from ember.ops.shape import pad

    widths = []
    for have, want in reversed(list(zip(t.shape, shape))):
        widths += [0, want - have]
    return pad(t, tuple(widths))


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True,
                   caller: str = "scatter_reduce"):
    """A copy of input with src reduced ('sum', 'prod', 'mean', 'amax', 'amin') into it at `index` along `dim`
    (`caller`: the op errors name, as index_reduce)."""
    _check_reduce(caller, reduce)
    if caller != "scatter_reduce":
        return apply(_scatter_reduce_op, input, index, src, dim=dim, reduce=reduce, include_self=bool(include_self),
                     caller=caller)
    return apply(_scatter_reduce_op, input, index, src, dim=dim, reduce=reduce, include_self=bool(include_self))


def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """A copy of input with the slices of source reduced into the slices `index` (1-D) along `dim`."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce argument must be one of prod, mean, amax or amin, got {reduce}")
    if len(index.shape) != 1:
        raise ShapeError(f"index_reduce: index must be 1-D, got shape {fmt_shape(index.shape)}")
    nd = input.ndim
    d = norm_dim("index_reduce", dim, nd)
    expected = list(input.shape)
    expected[d] = index.shape[0]
    if tuple(source.shape) != tuple(expected):
        raise ShapeError(f"index_reduce: source has shape {fmt_shape(source.shape)}, expected {fmt_shape(expected)} "
                         f"for input {fmt_shape(input.shape)} and {index.shape[0]} indices along dim {dim}")
    full = index.reshape(*[-1 if k == d else 1 for k in range(nd)]).expand(*source.shape)
    return scatter_reduce(input, d, full, source, reduce, include_self=include_self, caller="index_reduce")


# --- segments -------------------------------------------------------------------------------------------
class SegmentIdsOp(Op):
    """The segment of each of `total` rows, from segment lengths: [2, 0, 1] -> [0, 0, 2]."""

    name = "segment_ids"
    differentiable = False

    def infer(self, lengths, total):
        _check_index_tensor("segment_reduce", lengths)
        if len(lengths.shape) != 1:
            raise NotImplementedError(f"segment_reduce: lengths must be 1-D, got shape {fmt_shape(lengths.shape)}")
        return spec((total,), INT64_NP)

    def kernel(self, xp, lengths, total):
        self.infer(lengths, total)
        # ShapeError (a ValueError): the lengths describe how data's rows split, and they don't fit.
        if lengths.size and int(lengths.min()) < 0:
            raise ShapeError("segment_reduce: lengths contains negative value")
        if int(lengths.sum()) != total:
            raise ShapeError(f"segment_reduce: expected the lengths to sum to data.size(0) = {total}, "
                             f"got {int(lengths.sum())}")
        return xp.repeat(xp.arange(lengths.shape[0], dtype=np.int64), lengths)


_segment_ids_op = register(SegmentIdsOp())


_SEGMENT_REDUCES = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "amax": "amax", "amin": "amin",
                    "prod": "prod"}
_EMPTY = {"sum": 0.0, "mean": float("nan"), "amax": -float("inf"), "amin": float("inf"), "prod": 1.0}


def segment_reduce(data, reduce: str, *, lengths=None, offsets=None, axis: int = 0, unsafe: bool = False,
                   initial=None):
    """Reduce consecutive runs of rows of `data` ('sum', 'mean', 'max', 'min', 'prod'), one run per segment.

    Segments are given by `lengths` (1-D) or `offsets` (their boundaries, len(lengths) + 1 of them).
    An empty segment gives `initial` if set, else the reduction's empty value (0, nan, -inf, inf, 1);
    `initial` also takes part in every segment's reduction (PyTorch's torch.segment_reduce).
    """
    if reduce not in _SEGMENT_REDUCES:
        raise ValueError(f"segment_reduce: reduce argument must be either sum, prod, mean, max or min, got {reduce}")
    red = _SEGMENT_REDUCES[reduce]
    if (lengths is None) == (offsets is None):
        raise ValueError("segment_reduce: give exactly one of lengths and offsets")
    if lengths is None:
        if offsets.ndim != 1 or offsets.shape[0] < 1:
            raise NotImplementedError(f"segment_reduce: offsets must be 1-D and not empty, got shape "
                                      f"{fmt_shape(offsets.shape)}")
        lengths = offsets[1:] - offsets[:-1]
    if lengths.ndim != 1:
        raise NotImplementedError(f"segment_reduce: lengths must be 1-D, got shape {fmt_shape(lengths.shape)}")
    if axis != 0:
        raise ValueError(f"segment_reduce: expected axis to be the last dimension of lengths (0) but got {axis}")
    if data.ndim < 1:
        raise ShapeError("segment_reduce: data must have at least one dimension")
    ids = apply(_segment_ids_op, lengths, total=data.shape[0])
    shape = (lengths.shape[0], *data.shape[1:])
    index = ids.reshape(-1, *([1] * (data.ndim - 1))).expand(*data.shape)
    if initial is None:
        base = apply(_full_like_op, data, value=_EMPTY[red], shape=shape)
        return scatter_reduce(base, 0, index, data, red, include_self=False)
    base = apply(_full_like_op, data, value=initial, shape=shape)
    if red != "mean":
        return scatter_reduce(base, 0, index, data, red, include_self=True)
    # PyTorch's mean with an initial value: (initial + sum) / length, and initial for an empty segment.
    total = scatter_reduce(base, 0, index, data, "sum", include_self=True)
    count = scatter_add(apply(_full_like_op, data, value=0.0, shape=shape), 0, index,
                        apply(_full_like_op, data, value=1.0, shape=tuple(data.shape)))
    from ember.ops.elementwise import where

    return where(count > 0, total / count.clamp_min(1.0), base)


__all__ = ["scatter_reduce", "index_reduce", "segment_reduce"]
