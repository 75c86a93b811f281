"""Indexing: __getitem__/__setitem__, gather/scatter, index_select/index_add, masks, one_hot, nonzero."""

from __future__ import annotations

import warnings

import numpy as np

from ember import dispatch
from ember.autograd.grad_mode import state as grad_state
from ember.backends.meta import MetaArray
from ember.dispatch import apply, unary_path
from ember.errors import (
    DataDependentError,
    DeviceMismatchError,
    DtypeError,
    IndexOutOfBoundsError,
    ShapeError,
    fmt_shape,
)
from ember.kernels.row_reduce import reduce_into_rows
from ember.op import Op, register
from ember.ops._rules import BOOL_NP, FLOAT_NP, INT64_NP, binary_dtype, norm_dim, spec
from ember.symbolic import carry_symbols, has_symbols, values_of

# --- index templates ---------------------------------------------------------------
# An index is stored as a template: ints, slices, None, ..., bools as given, and each tensor
# (or array-like) replaced by ("t", k) — the tensors become extra op inputs, so devices are
# checked and graph tracing sees them.
_BASIC_TYPES = frozenset((int, slice, type(None), type(Ellipsis)))


def encode_index(x, index, op: str = "getitem"):
    """Split a user index into (template, tensors) with lists/arrays turned into tensors (`op`: the name errors
    carry)."""
    from ember.tensor import Tensor

    if not isinstance(index, tuple):
        index = (index,)
    template, tensors = [], []
    for item in index:
        if isinstance(item, slice):
            template.append(slice(_int_or_none(item.start), _int_or_none(item.stop), _int_or_none(item.step)))
        elif item is None or item is Ellipsis or isinstance(item, bool):
            template.append(item)
        elif isinstance(item, (int, np.integer)):
            template.append(int(item))
        elif isinstance(item, Tensor) and item.ndim == 0 and item._data.dtype.kind in "iu" and not isinstance(item._data, MetaArray) and type(item._data) is np.ndarray:
            template.append(int(item._data))
        else:
            if not isinstance(item, Tensor):
                arr = np.asarray(item)
                if arr.dtype.kind not in "biu":
                    raise IndexError(
                        f"{op}: only integers, slices, None, ..., and integer or bool arrays are valid "
                        f"indices, got {type(item).__name__} of dtype {arr.dtype}"
                    )
                if arr.dtype.kind == "u":
                    arr = arr.astype(np.int64)
                item = Tensor._make(x._device.backend.from_host(arr), x._device)
            else:
                item = _tensor_index(item, op)
            template.append(("t", len(tensors)))
            tensors.append(item)
    return tuple(template), tensors


def _tensor_index(item, op: str):
    """A tensor used as an index, by PyTorch's rule: int64 and int32 hold positions (negative ones count from the
    end), bool is a mask, uint8 is a mask too (deprecated, with PyTorch's warning); other dtypes are refused."""
    kind, size = item._data.dtype.kind, item._data.dtype.itemsize
    if kind == "b" or (kind == "i" and size >= 4):
        return item
    if kind == "u" and size == 1:
        warnings.warn("indexing with dtype uint8 is now deprecated, please use a dtype bool instead.",
                      UserWarning, stacklevel=4)
        return item != 0
    raise IndexError(f"{op}: tensors used as indices must be int64, int32, uint8 or bool, got {item.dtype}")


def _int_or_none(v):
    if v is None:
        return None
    if hasattr(v, "__index__"):
        return v.__index__()
    raise TypeError(f"slice indices must be integers or None, got {type(v).__name__}")


def decode_index(template, arrays):
    """Rebuild a NumPy index from a template and the index arrays."""
    if not arrays:
        return template
    return tuple(arrays[item[1]] if type(item) is tuple else item for item in template)


_UNKNOWN_STAND_INS = (2, 1000003, 1000033)


def _abstract_index(op: str, x, template, arrays):
    """The shape of x[index] computed from shapes alone: index a zero-memory broadcast array.

    A boolean mask's shape is still checked (with an all-true stand-in); only the number of true
    values is unknown, so a well-shaped mask then raises DataDependentError.
    """
    if has_symbols(tuple(x.shape)) or any(has_symbols(tuple(a.shape)) for a in arrays):
        # A dynamic jit trace: index with plain sizes, then carry the symbolic ones through.
        def rule(x_shape, *a_shapes):
            return _abstract_index(op, MetaArray(x_shape, x.dtype), template,
                                   [MetaArray(s, a.dtype) for s, a in zip(a_shapes, arrays)])
        shapes = [tuple(x.shape)] + [tuple(a.shape) for a in arrays]
        return carry_symbols(shapes, rule(*(values_of(s) for s in shapes)), rule)
    dummies = []
    has_mask = False
    for a in arrays:
        if any(d is None for d in a.shape):
            raise DataDependentError(f"{op}: index arrays of unknown shape are not supported while tracing")
        if a.dtype == BOOL_NP:
            has_mask = True
            dummies.append(np.ones(a.shape, dtype=bool))
        else:
            dummies.append(np.zeros(a.shape, dtype=np.intp))
    if any(d is None for d in x.shape):
        if has_mask:
            raise _mask_needs_values(op)
        # Index stand-ins of several sizes for the unknown dims: a result dim that differs between them
        # depends on an unknown one and is unknown itself.
        results, error = [], None
        for size in _UNKNOWN_STAND_INS:
            base = np.broadcast_to(np.empty((), dtype=np.int8), tuple(size if d is None else d for d in x.shape))
            try:
                results.append(base[decode_index(template, dummies)].shape)
            except IndexError as e:  # an integer index past a small stand-in
                error = e
        if not results:
            raise IndexError(f"{op}: {error} (tensor of shape {fmt_shape(x.shape)})") from None
        return tuple(dims[0] if len(set(dims)) == 1 else None for dims in zip(*results))
    base = np.broadcast_to(np.empty((), dtype=np.int8), tuple(x.shape))
    try:
        res_shape = base[decode_index(template, dummies)].shape
    except IndexError as e:
        raise IndexError(f"{op}: {e} (tensor of shape {fmt_shape(x.shape)})") from None
    except (ValueError, TypeError) as e:  # a zero slice step, say: NumPy's words, with the op's name
        raise type(e)(f"{op}: {e}") from None
    if has_mask:
        raise _mask_needs_values(op)
    return res_shape


def _mask_needs_values(op: str) -> DataDependentError:
    return DataDependentError(
        f"{op}: boolean-mask indexing needs the mask's values, which the meta device "
        f"(or a symbolic tensor) does not have"
    )


class GetItemOp(Op):
    name = "getitem"
    is_view = "maybe"
    save_inputs = slice(1, None)  # the index tensors

    def infer(self, x, *arrays, index):
        return spec(_abstract_index(self.name, x, index, arrays), x.dtype)

    def kernel(self, xp, x, *arrays, index):
        out = x[decode_index(index, arrays) if arrays else index]
        if type(out) is not type(x):
            # A full integer index gives a NumPy scalar (a copy); a trailing ... gives a 0-d view.
            out = x[(*index, Ellipsis)] if not arrays and Ellipsis not in index else xp.asarray(out)
        return out

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape

        idx = [ctx.input(k) for k in range(1, len(ctx.in_meta))] if len(ctx.in_meta) > 1 else []
        base = zeros_like_shape(g, ctx.in_shape(0))
        return (apply(_index_put_op, base, g, *idx, index=ctx.attrs["index"], accumulate=True),) + (None,) * len(idx)


_getitem_op = register(GetItemOp())
_getitem_path = unary_path(_getitem_op)



def _add_at(xp, out, idx, values):
    if xp is np:
        axis = len(idx) - 1 if type(idx) is tuple and idx else -1
        rows = idx[-1] if axis >= 0 else None
        if rows is not None and all(type(i) is slice and i == slice(None) for i in idx[:-1]) \
                and getattr(rows, "ndim", 0) == 1 and rows.dtype.kind in "iu" \
                and getattr(values, "shape", ()) == out.shape[:axis] + rows.shape + out.shape[axis + 1:]:
            reduce_into_rows(np.add, out, rows, values, axis)  # index_add's form: whole slices at rows
        else:
            np.add.at(out, idx, values)
    else:
        device_ufunc_at(xp, "add", out, idx, values)


def device_ufunc_at(xp, name: str, out, idx, values) -> None:
    """out[idx] op= values on a GPU array module: CuPy 13+'s ufunc.at (add, maximum, minimum), else cupyx's
    scatter functions, which CuPy 14 deprecates."""
    ufunc = getattr(xp, name)
    if hasattr(ufunc, "at"):
        ufunc.at(out, idx, values)
        return
    import cupyx

    getattr(cupyx, {"add": "scatter_add", "maximum": "scatter_max", "minimum": "scatter_min"}[name])(out, idx, values)


class IndexPutOp(Op):
    """out = base with base[index] replaced by (or, with accumulate, increased by) values."""

    name = "index_put"
    fresh_output = True
    save_inputs = slice(2, None)  # the index tensors

    def infer(self, base, values, *arrays, index, accumulate=False):
        shape = _abstract_index(self.name, base, index, arrays)
        _refuse_cast_through_index(self.name, base, values, arrays)
        if not isinstance(values, (int, float, bool)):
            try:
                from ember.ops._rules import broadcast_shapes

                target = broadcast_shapes(self.name, tuple(values.shape), shape)
            except ShapeError:
                target = None
            if target != tuple(shape):
                raise ShapeError(
                    f"setitem: cannot assign a value of shape {fmt_shape(values.shape)} to an indexed "
                    f"region of shape {fmt_shape(shape)}"
                )
        return spec(base.shape, base.dtype)

    def kernel(self, xp, base, values, *arrays, index, accumulate=False):
        out = base.copy()
        idx = decode_index(index, arrays)
        _refuse_cast_through_index(self.name, base, values, arrays)
        if not isinstance(values, (int, float, bool)):
            values = values.astype(base.dtype, copy=False)
        if accumulate and arrays:
            _add_at(xp, out, idx, values)  # index arrays may repeat a position: accumulate each
        elif accumulate:
            out[idx] += values  # basic indexing names each element once: a plain add is exact
        else:
            out[idx] = values
        return out

    def vjp(self, ctx, g):
        n = len(ctx.in_meta)
        idx = [ctx.input(k) for k in range(2, n)]
        template = ctx.attrs["index"]
        g_base = g if ctx.attrs.get("accumulate") else apply(_index_put_op, g, 0.0, *idx, index=template)
        g_values = apply(_getitem_op, g, *idx, index=template) if ctx.needs_grad(1) else None
        return (g_base, g_values) + (None,) * len(idx)


_index_put_op = register(IndexPutOp())


def getitem(x, index):
    """x[index]: basic indexing gives a view; integer/bool arrays give a copy."""
    t = type(index)
    if t in _BASIC_TYPES:  # the common cases skip template building
        return _getitem_path(x, index=(index,))
    if t is tuple and all(type(i) in _BASIC_TYPES for i in index):
        return _getitem_path(x, index=index)
    template, tensors = encode_index(x, index)
    return apply(_getitem_op, x, *tensors, index=template)


def index_put(x, index, values, accumulate: bool = False):
    """A copy of x with x[index] set to (or increased by) values."""
    return _index_put(x, index, values, accumulate, "index_put")


def _index_put(x, index, values, accumulate: bool, op: str):
    template, tensors = encode_index(x, index, op)
    return apply(_index_put_op, x, values, *tensors, index=template, accumulate=accumulate)


def setitem(x, index, value) -> None:
    """x[index] = value, written into x's storage (seen through every view)."""
    from ember.tensor import Tensor

    if isinstance(value, Tensor) and value._device is not x._device:
        raise DeviceMismatchError(f"setitem: value is on {value._device} but the tensor is on {x._device}")
    needs_graph = grad_state.enabled and (x._requires_grad or (isinstance(value, Tensor) and value._requires_grad))
    symbolic = (dispatch.current().symbolic or dispatch.is_symbolic(x)
                or (isinstance(value, Tensor) and dispatch.is_symbolic(value)))
    if needs_graph or symbolic:
        x._assign_result("setitem", _index_put(x, index, value, False, "setitem"))
        return
    x._check_inplace("setitem")
    template, tensors = encode_index(x, index, "setitem")
    arrays = [t._data for t in tensors]
    vals = value._data if isinstance(value, Tensor) else value
    if isinstance(x._data, MetaArray) or isinstance(vals, MetaArray):
        _check_setitem(x._data, vals, arrays, template)
        x._version[0] += 1
        return
    if isinstance(value, Tensor):
        _refuse_cast_through_index("setitem", x._data, vals, arrays)
    if isinstance(vals, (list, tuple)):
        vals = np.asarray(vals)
    if not isinstance(vals, (int, float, bool)) and not isinstance(vals, np.generic):
        if vals.dtype in FLOAT_NP and x._data.dtype not in FLOAT_NP:
            vals = vals.astype(x._data.dtype)
    if not getattr(getattr(x._data, "flags", None), "writeable", True):  # CuPy's flags have no writeable
        raise RuntimeError("setitem: this tensor is a read-only view (from expand/broadcast_to); clone it first")
    try:
        x._data[decode_index(template, arrays)] = vals
    except (ValueError, IndexError) as e:
        _check_setitem(x._data, vals, arrays, template)
        raise type(e)(f"setitem: {e}") from None
    x._version[0] += 1


def _refuse_cast_through_index(op: str, base, values, arrays) -> None:
    """PyTorch's rule for index tensors: the values written through them are a tensor of the destination's dtype,
    or a Python number; a tensor of another dtype is refused rather than cast (a float into an integer tensor was
    truncated). Basic indexing (no index tensors) copies with a cast, as PyTorch's x[0] = t does."""
    if arrays and hasattr(values, "shape") and not isinstance(values, np.generic) and values.dtype != base.dtype:
        raise DtypeError(f"{op}: values written through an index tensor must have the tensor's dtype "
                         f"({base.dtype.name}), got {values.dtype.name}; cast them with .to() first")


def _check_setitem(x, vals, arrays, template) -> None:
    """Raise setitem's own error for a bad index or value shape (masks: only on meta, where values are missing)."""
    try:
        _abstract_index("setitem", x, template, arrays)
    except DataDependentError:
        if isinstance(x, MetaArray):
            raise
        return  # a mask on real data: NumPy's message (prefixed with setitem) says what is wrong
    _index_put_op.infer(x, vals, *arrays, index=template)


# --- along-dim ops -------------------------------------------------------------------------
_POSITION_DTYPES = (INT64_NP, np.dtype(np.int32))


def _check_index_tensor(op, index, dtypes=_POSITION_DTYPES):
    """An index tensor of positions must be int64 or int32 (`dtypes`), as in PyTorch: a float or bool index is a
    mistake, and a narrower integer type has no meaning NumPy and PyTorch agree on."""
    if index.dtype not in dtypes:
        wanted = " or ".join(np.dtype(d).name for d in dtypes)
        raise DtypeError(f"{op}: index must be an {wanted} tensor, got {np.dtype(index.dtype).name}")


def _bounds(xp, op, index, size, dim, wrap: bool = False):
    """Every position in [0, size) (in [-size, size) where negative ones count from the end, `wrap`). PyTorch's
    gather, scatter, index_select, index_add and embedding refuse negative positions; a -1 that NumPy would take as
    the last row is the padding sentinel of some data pipelines, not a wish for the last row."""
    if index.size and not isinstance(index, MetaArray):
        lo, hi = int(index.min()), int(index.max())
        low = -size if wrap else 0
        if lo < low or hi >= size:
            bad = lo if lo < low else hi
            raise IndexOutOfBoundsError(f"{op}: index {bad} is out of bounds for dimension {dim} with size {size}")


def _along_dim_index(xp, index, dim):
    """Full index tuple that addresses positions (…, index[...], …) along `dim`."""
    nd = len(index.shape)  # open grids as NumPy's indices(sparse=True) makes them (CuPy's has no sparse form)
    grids = [xp.arange(n).reshape((1,) * i + (n,) + (1,) * (nd - i - 1)) for i, n in enumerate(index.shape)]
    grids[dim] = index
    return tuple(grids)


def _check_along(op, x, dim, index):
    nd = len(x.shape)
    d = norm_dim(op, dim, nd)
    if len(index.shape) != nd and not (nd == 0 and len(index.shape) <= 1):
        raise ShapeError(
            f"{op}: index must have the same number of dimensions as the input: input {fmt_shape(x.shape)}, "
            f"index {fmt_shape(index.shape)}"
        )
    for k in range(nd):
        if k != d and index.shape[k] is not None and x.shape[k] is not None and index.shape[k] > x.shape[k]:
            raise ShapeError(
                f"{op}: index {fmt_shape(index.shape)} is larger than input {fmt_shape(x.shape)} at dimension {k}"
            )
    return d


class GatherOp(Op):
    name = "gather"
    fresh_output = True
    save_inputs = (1,)
    wraps = False  # negative positions are errors
    index_dtypes = _POSITION_DTYPES

    def infer(self, x, index, dim):
        _check_index_tensor(self.name, index, self.index_dtypes)
        _check_along(self.name, x, dim, index)
        return spec(index.shape, x.dtype)

    def kernel(self, xp, x, index, dim):
        _check_index_tensor(self.name, index, self.index_dtypes)
        d = _check_along(self.name, x, dim, index)
        _bounds(xp, self.name, index, x.shape[d] if x.ndim else 1, d, wrap=self.wraps)
        if x.ndim == 0:
            return x.reshape(index.shape).copy()
        return x[_along_dim_index(xp, index, d)]

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape

        index = ctx.input(1)
        return scatter_add(zeros_like_shape(g, ctx.in_shape(0)), ctx.attrs["dim"], index, g), None


_gather_op = register(GatherOp())


def gather(input, dim: int, index):
    """out[i][j] = input[index[i][j]][j] (dim 0): values picked along `dim`."""
    return apply(_gather_op, input, index, dim=dim)


class TakeAlongDimOp(GatherOp):
    """gather of an int64 index whose negative positions count from the end (PyTorch's take_along_dim)."""

    name = "take_along_dim"
    wraps = True
    index_dtypes = (INT64_NP,)

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape
        from ember.ops.elementwise import where

        index, dim = ctx.input(1), ctx.attrs["dim"]
        shape = ctx.in_shape(0)
        size = shape[norm_dim(self.name, dim, len(shape))] if shape else 1
        positions = where(index < 0, index + size, index)
        return scatter_add(zeros_like_shape(g, shape), dim, positions, g), None


_take_along_dim_op = register(TakeAlongDimOp())


class _ScatterBase(Op):
    save_inputs = (1,)

    def infer(self, x, index, src, dim):
        _check_index_tensor(self.name, index)
        _check_along(self.name, x, dim, index)
        if not isinstance(src, (int, float, bool)):
            for k in range(len(index.shape)):
                if src.shape[k] is not None and index.shape[k] is not None and index.shape[k] > src.shape[k]:
                    raise ShapeError(
                        f"{self.name}: index {fmt_shape(index.shape)} is larger than src {fmt_shape(src.shape)}"
                    )
        return spec(x.shape, x.dtype)

    def _prep(self, xp, x, index, src, dim):
        self.infer(x, index, src, dim)
        d = norm_dim(self.name, dim, x.ndim)
        _bounds(xp, self.name, index, x.shape[d] if x.ndim else 1, d)
        idx = _along_dim_index(xp, index, d)
        if not isinstance(src, (int, float, bool)):
            src = src[tuple(slice(0, s) for s in index.shape)].astype(x.dtype, copy=False)
        return idx, src

    def _src_grad(self, ctx, g):
        """gather(g) at the index, zero-padded to src's shape (src may be larger than the index)."""
        if not ctx.needs_grad(2):
            return None
        from ember.ops.shape import pad

        g_src = gather(g, ctx.attrs["dim"], ctx.input(1))
        src_shape = ctx.in_shape(2)
        if tuple(g_src.shape) != src_shape:
            widths = []
            for have, want in reversed(list(zip(g_src.shape, src_shape))):
                widths += [0, want - have]
            g_src = pad(g_src, tuple(widths))
        return g_src


class ScatterOp(_ScatterBase):
    name = "scatter"
    fresh_output = True

    def kernel(self, xp, x, index, src, dim):
        idx, src = self._prep(xp, x, index, src, dim)
        out = x.copy()
        out[idx] = src
        return out

    def vjp(self, ctx, g):
        return scatter(g, ctx.attrs["dim"], ctx.input(1), 0.0), None, self._src_grad(ctx, g)


_scatter_op = register(ScatterOp())


class ScatterAddOp(_ScatterBase):
    name = "scatter_add"
    fresh_output = True

    def kernel(self, xp, x, index, src, dim):
        idx, src = self._prep(xp, x, index, src, dim)
        out = x.copy()
        _add_at(xp, out, idx, src)
        return out

    def vjp(self, ctx, g):
        return g, None, self._src_grad(ctx, g)


_scatter_add_op = register(ScatterAddOp())


def scatter(input, dim: int, index, src=None, *, value=None, reduce=None):
    """A copy of input with src (or value) written at `index` along `dim`."""
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported (only 'add')")
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: give src or value")
    return apply(_scatter_op, input, index, src, dim=dim)


def scatter_add(input, dim: int, index, src):
    """A copy of input with src added at `index` along `dim` (repeated indices accumulate)."""
    return apply(_scatter_add_op, input, index, src, dim=dim)


class IndexSelectOp(Op):
    name = "index_select"
    fresh_output = True
    save_inputs = (1,)

    def infer(self, x, index, dim, caller="index_select"):
        _check_index_tensor(caller, index)
        if len(index.shape) > 1:
            raise ShapeError(f"{caller}: index must be 1-D, got shape {fmt_shape(index.shape)}")
        d = norm_dim(caller, dim, len(x.shape))
        shape = list(x.shape)
        if shape:
            shape[d] = index.shape[0] if index.shape else 1
        return spec(tuple(shape), x.dtype)

    def kernel(self, xp, x, index, dim, caller="index_select"):
        self.infer(x, index, dim, caller)
        d = norm_dim(caller, dim, x.ndim)
        _bounds(xp, caller, index, x.shape[d] if x.ndim else 1, d)
        if x.ndim == 0:
            return x.copy()
        return xp.take(x, index.reshape(-1), axis=d)

    def vjp(self, ctx, g):
        from ember.ops.creation_ops import zeros_like_shape

        index = ctx.input(1)
        return index_add(zeros_like_shape(g, ctx.in_shape(0)), ctx.attrs["dim"], index, g), None


_index_select_op = register(IndexSelectOp())


def index_select(input, dim: int, index, *, caller: str = "index_select"):
    """The slices of input at positions `index` (1-D) along `dim` (`caller`: the op errors name, as embedding)."""
    if caller != "index_select":
        return apply(_index_select_op, input, index, dim=dim, caller=caller)
    return apply(_index_select_op, input, index, dim=dim)


class IndexAddOp(Op):
    name = "index_add"
    fresh_output = True
    save_inputs = (1,)

    def infer(self, x, index, src, dim, alpha=1):
        _check_index_tensor(self.name, index)
        d = norm_dim(self.name, dim, len(x.shape))
        expected = list(x.shape)
        if expected:
            expected[d] = index.shape[0] if index.shape else 1
        if tuple(src.shape) != tuple(expected) and not (len(x.shape) == 0):
            raise ShapeError(
                f"index_add: source has shape {fmt_shape(src.shape)}, expected {fmt_shape(expected)} "
                f"for input {fmt_shape(x.shape)} and {index.shape[0] if index.shape else 1} indices along dim {dim}"
            )
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x, index, src, dim, alpha=1):
        self.infer(x, index, src, dim, alpha)
        d = norm_dim(self.name, dim, x.ndim)
        out = x.copy()
        _bounds(xp, self.name, index, x.shape[d] if x.ndim else 1, d)
        idx = (slice(None),) * d + (index.reshape(-1),)
        _add_at(xp, out, idx, (src * alpha if alpha != 1 else src).astype(x.dtype, copy=False))
        return out

    def vjp(self, ctx, g):
        index = ctx.input(1)
        alpha = ctx.attrs.get("alpha", 1)
        g_src = index_select(g, ctx.attrs["dim"], index) if ctx.needs_grad(2) else None
        if g_src is not None and alpha != 1:
            g_src = g_src * alpha
        return g, None, g_src


_index_add_op = register(IndexAddOp())


def index_add(input, dim: int, index, source, *, alpha=1):
    """A copy of input with alpha*source added at positions `index` along `dim`."""
    return apply(_index_add_op, input, index, source, dim=dim, alpha=alpha)


def masked_fill(input, mask, value):
    """A copy of input with `value` where mask is true (keeps input's dtype)."""
    from ember.ops.elementwise import where
    from ember.tensor import Tensor

    if mask._data.dtype != BOOL_NP:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"masked_fill: value must be a 0-d tensor, got shape {fmt_shape(value.shape)}")
        value = value.to(input.dtype)
    elif input._data.dtype not in FLOAT_NP:
        if isinstance(value, float) and not float(value).is_integer() and input._data.dtype != BOOL_NP:
            value = int(value)
        value = bool(value) if input._data.dtype == BOOL_NP else int(value)
    from ember.ops._rules import broadcast_shapes

    shape = broadcast_shapes("masked_fill", tuple(input.shape), tuple(mask.shape))
    if shape != tuple(input.shape):
        raise ShapeError(
            f"masked_fill: mask of shape {fmt_shape(mask.shape)} does not broadcast to the input's shape "
            f"{fmt_shape(input.shape)}"
        )
    out = where(mask, value, input)
    return out if out._data.dtype == input._data.dtype else out.to(input.dtype)


def masked_select(input, mask):
    """The elements of input where mask is true, as a 1-D tensor."""
    from ember.ops.shape import broadcast_tensors

    a, m = broadcast_tensors(input, mask)
    return getitem(a, m)


class NonzeroOp(Op):
    name = "nonzero"
    fresh_output = True
    differentiable = False

    def infer(self, x):
        raise DataDependentError(
            "nonzero: the output shape depends on the input's values, which the meta device "
            "(or a symbolic tensor) does not have"
        )

    def kernel(self, xp, x):
        return xp.stack(xp.nonzero(x), axis=-1).astype(np.int64) if x.ndim else xp.zeros((int(bool(x)), 0), dtype=np.int64)


_nonzero_op = register(NonzeroOp())


def nonzero(input, *, as_tuple: bool = False):
    """Indices of non-zero elements: (N, ndim), or one 1-D tensor per dim with as_tuple."""
    idx = apply(_nonzero_op, input)
    if as_tuple:
        from ember.ops.split import unbind

        return unbind(idx, 1) if input.ndim else (idx.reshape(-1),)
    return idx


argwhere = nonzero


class OneHotOp(Op):
    name = "one_hot"
    fresh_output = True
    differentiable = False

    def infer(self, x, num_classes):
        _check_one_hot_input(x)
        if num_classes < 0:
            raise DataDependentError("one_hot: num_classes=-1 needs the input's values; pass num_classes")
        return spec(tuple(x.shape) + (num_classes,), INT64_NP)

    def kernel(self, xp, x, num_classes):
        _check_one_hot_input(x)
        if num_classes < 0:
            num_classes = int(x.max()) + 1 if x.size else 0
        if x.size and (int(x.min()) < 0 or int(x.max()) >= num_classes):
            raise IndexOutOfBoundsError(f"one_hot: class values must be in [0, {num_classes}), got "
                                        f"{int(x.min())}..{int(x.max())}")
        return (x[..., None] == xp.arange(num_classes)).astype(np.int64)


def _check_one_hot_input(x) -> None:
    if x.dtype != INT64_NP:  # PyTorch takes int64 class labels only
        raise DtypeError(f"one_hot: input must be an int64 tensor of class labels, got {np.dtype(x.dtype).name}")


_one_hot_op = register(OneHotOp())


def one_hot(tensor, num_classes: int = -1):
    """Integer class labels to one-hot int64 vectors of length num_classes."""
    return apply(_one_hot_op, tensor, num_classes=int(num_classes))


def take_along_dim(input, indices, dim: int | None = None):
    """Values of input at `indices` along `dim`, input and indices broadcast against each other in the other
    dims; negative indices count from the end. dim=None: positions in the flattened input (PyTorch's
    take_along_dim)."""
    if dim is None:  # PyTorch's flat form is gather itself: int32 indices too, negative ones refused
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim: input and indices must have the same number of dimensions, got input "
                         f"{fmt_shape(input.shape)} and indices {fmt_shape(indices.shape)}")
    from ember.ops._rules import broadcast_shapes

    d = norm_dim("take_along_dim", dim, input.ndim)
    rest = broadcast_shapes("take_along_dim", tuple(1 if k == d else n for k, n in enumerate(input.shape)),
                            tuple(1 if k == d else n for k, n in enumerate(indices.shape)))
    x_shape = rest[:d] + (input.shape[d],) + rest[d + 1:]
    i_shape = rest[:d] + (indices.shape[d],) + rest[d + 1:]
    x = input if tuple(input.shape) == x_shape else input.expand(*x_shape)
    i = indices if tuple(indices.shape) == i_shape else indices.expand(*i_shape)
    return apply(_take_along_dim_op, x, i, dim=d)


__all__ = ["getitem", "setitem", "index_put", "gather", "scatter", "scatter_add", "index_select", "index_add",
           "masked_fill", "masked_select", "nonzero", "argwhere", "one_hot", "take_along_dim", "binary_dtype"]
