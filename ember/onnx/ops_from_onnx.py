"""The table from ONNX operators to Ember: `FROM_ONNX[op_type](ins, attrs)` computes a node's outputs.

Inputs are Ember tensors, or NumPy arrays for values known without the graph's inputs (initializers,
constants, shapes). Shape arithmetic (Shape -> Gather -> Concat -> Reshape) stays in NumPy through
`HOST`, so sizes are plain integers when a later op needs them, eagerly and under ember.jit alike.
"""

from __future__ import annotations

import numpy as np

from ember import creation, dtypes, ops
from ember.nn import functional as F
from ember.tensor import Tensor

FROM_ONNX: dict = {}
HOST: dict = {}  # op_type -> NumPy implementation used when every input is a NumPy array


def onnx_op(*names, host=None):
    """Register the decorated function for the named ONNX operators (and a NumPy version, when given)."""

    def deco(fn):
        for n in names:
            FROM_ONNX[n] = fn
            if host is not None:
                HOST[n] = host
        return fn

    return deco


def T(x):
    """x as an Ember tensor (NumPy arrays are wrapped)."""
    if x is None or isinstance(x, Tensor):
        return x
    return creation.from_numpy(np.ascontiguousarray(x))


def ints(x, what: str) -> list:
    """A shape-like input as a list of Python ints."""
    if isinstance(x, Tensor):
        x = x.numpy()  # only eagerly: under a trace, sizes must come from NumPy values
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _axis(axis, nd):
    return axis + nd if axis < 0 else axis


def _dtype(code):
    from onnx.helper import tensor_dtype_to_np_dtype

    return dtypes.as_dtype(tensor_dtype_to_np_dtype(code))


# --- elementwise ---------------------------------------------------------------------------
_UNARY = {
    "Relu": F.relu, "Sigmoid": ops.sigmoid, "Tanh": ops.tanh, "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt,
    "Abs": ops.abs, "Neg": ops.neg, "Reciprocal": ops.reciprocal, "Floor": ops.floor, "Ceil": ops.ceil, "Erf": ops.erf,
    "Sin": ops.sin, "Cos": ops.cos, "Tan": ops.tan, "Sign": ops.sign, "Round": ops.round, "Not": ops.logical_not,
    "IsNaN": ops.isnan, "BitwiseNot": ops.bitwise_not, "Softsign": lambda x: x / (1 + x.abs()), "Identity": lambda x: x,
}
_UNARY_NP = {"Neg": np.negative, "Abs": np.abs, "Floor": np.floor, "Ceil": np.ceil, "Sqrt": np.sqrt, "Not": np.logical_not,
             "Identity": lambda x: x, "Sign": np.sign, "Reciprocal": np.reciprocal, "Exp": np.exp, "Log": np.log}

for _name, _fn in _UNARY.items():
    def _make(fn):
        return lambda ins, a: fn(T(ins[0]))

    FROM_ONNX[_name] = _make(_fn)
for _name, _fn in _UNARY_NP.items():
    HOST[_name] = (lambda fn: lambda ins, a: np.asarray(fn(ins[0])))(_fn)

_BINARY = {"BitwiseAnd": ops.bitwise_and, "BitwiseOr": ops.bitwise_or, "BitwiseXor": ops.bitwise_xor, "Add": ops.add, "Sub": ops.sub, "Mul": ops.mul, "Pow": ops.pow, "Equal": ops.eq, "Less": ops.lt,
           "Greater": ops.gt, "LessOrEqual": ops.le, "GreaterOrEqual": ops.ge, "And": ops.logical_and,
           "Or": ops.logical_or, "Xor": ops.logical_xor}
_BINARY_NP = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
              "Greater": np.greater, "And": np.logical_and, "Or": np.logical_or, "Pow": np.power,
              "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


for _name, _fn in _BINARY.items():
    FROM_ONNX[_name] = (lambda fn: lambda ins, a: fn(T(ins[0]), T(ins[1])))(_fn)
for _name, _fn in _BINARY_NP.items():
    HOST[_name] = (lambda fn: lambda ins, a: np.asarray(fn(ins[0], ins[1])).astype(
        np.bool_ if fn in (np.equal, np.less, np.greater, np.less_equal, np.greater_equal, np.logical_and,
                           np.logical_or) else ins[0].dtype))(_fn)


def _div_np(ins, a):
    x, y = ins
    if x.dtype.kind in "iu":  # integer division truncates towards zero
        return (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(x.dtype)
    return (x / y).astype(x.dtype)


@onnx_op("Div", host=_div_np)
def _div(ins, a):
    x, y = T(ins[0]), T(ins[1])
    if x.dtype.is_floating_point:
        return x / y
    return ops.div(x, y, rounding_mode="trunc")  # ONNX integer division truncates


def _mod_np(ins, a):
    x, y = ins
    return np.asarray(np.fmod(x, y) if a.get("fmod", 0) else np.mod(x, y)).astype(x.dtype)


@onnx_op("Mod", host=_mod_np)
def _mod(ins, a):
    x, y = T(ins[0]), T(ins[1])
    return ops.fmod(x, y) if a.get("fmod", 0) else ops.remainder(x, y)


def _variadic_for(op_type):
    def run(ins, a):
        xs = [T(x) for x in ins]
        out = xs[0]
        for x in xs[1:]:
            out = ops.maximum(out, x) if op_type == "Max" else ops.minimum(out, x) if op_type == "Min" else out + x
        return out / len(xs) if op_type == "Mean" else out

    return run


for _name in ("Max", "Min", "Sum", "Mean"):
    FROM_ONNX[_name] = _variadic_for(_name)
HOST["Max"] = lambda ins, a: np.maximum.reduce(ins)
HOST["Min"] = lambda ins, a: np.minimum.reduce(ins)


@onnx_op("Where", host=lambda ins, a: np.where(*ins))
def _where(ins, a):
    return ops.where(T(ins[0]), T(ins[1]), T(ins[2]))


@onnx_op("Clip")
def _clip(ins, a):
    x = T(ins[0])
    lo = ins[1] if len(ins) > 1 else None
    hi = ins[2] if len(ins) > 2 else None
    if lo is not None and not isinstance(lo, Tensor):
        lo = float(np.asarray(lo)) if x.dtype.is_floating_point else int(np.asarray(lo))
    if hi is not None and not isinstance(hi, Tensor):
        hi = float(np.asarray(hi)) if x.dtype.is_floating_point else int(np.asarray(hi))
    if lo is None and hi is None:  # both bounds optional in ONNX: no bound, no change
        return x
    return ops.clamp(x, lo, hi)


@onnx_op("IsInf")
def _isinf(ins, a):
    x = T(ins[0])
    pos, neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    out = ops.isinf(x)
    if not pos:
        out = out & (x < 0)
    if not neg:
        out = out & (x > 0)
    return out


@onnx_op("LeakyRelu")
def _leaky(ins, a):
    return F.leaky_relu(T(ins[0]), a.get("alpha", 0.01))


@onnx_op("Elu")
def _elu(ins, a):
    return F.elu(T(ins[0]), a.get("alpha", 1.0))


@onnx_op("Selu")
def _selu(ins, a):
    x = T(ins[0])
    alpha, gamma = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
    return gamma * ops.where(x > 0, x, alpha * (ops.exp(x) - 1))


@onnx_op("Gelu")
def _gelu(ins, a):
    return F.gelu(T(ins[0]), approximate=a.get("approximate", "none"))


@onnx_op("Softplus")
def _softplus(ins, a):
    return F.softplus(T(ins[0]))


@onnx_op("HardSigmoid")
def _hardsigmoid(ins, a):
    x = T(ins[0])
    return ops.clamp(x * a.get("alpha", 0.2) + a.get("beta", 0.5), 0.0, 1.0)


@onnx_op("HardSwish")
def _hardswish(ins, a):
    return F.hardswish(T(ins[0]))


@onnx_op("PRelu")
def _prelu(ins, a):
    x, slope = T(ins[0]), T(ins[1])
    return ops.where(x >= 0, x, x * slope)


@onnx_op("Cast", host=lambda ins, a: ins[0].astype(_dtype(a["to"]).np))
def _cast(ins, a):
    return T(ins[0]).to(_dtype(a["to"]))


@onnx_op("CastLike")
def _cast_like(ins, a):
    return T(ins[0]).to(T(ins[1]).dtype)


# --- shapes ----------------------------------------------------------------------------------
def _shape_np(ins, a):
    shape = np.array(ins[0].shape, dtype=np.int64)
    return shape[a.get("start", 0):a.get("end", None)]


@onnx_op("Shape", host=_shape_np)
def _shape(ins, a):
    shape = np.array([int(d) for d in ins[0].shape], dtype=np.int64)
    return shape[a.get("start", 0):a.get("end", None)]  # sizes are known here: they stay NumPy


@onnx_op("Size", host=lambda ins, a: np.array(ins[0].size, dtype=np.int64))
def _size(ins, a):
    return np.array(int(np.prod([int(d) for d in ins[0].shape])), dtype=np.int64)


def _reshape_target(x_shape, shape, allowzero):
    if not allowzero:
        shape = [x_shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [int(d) for d in shape]


@onnx_op("Reshape", host=lambda ins, a: ins[0].reshape(_reshape_target(ins[0].shape, ints(ins[1], "shape"),
                                                                         a.get("allowzero", 0))))
def _reshape(ins, a):
    x = T(ins[0])
    return x.reshape(_reshape_target(tuple(x.shape), ints(ins[1], "Reshape shape"), a.get("allowzero", 0)))


@onnx_op("Flatten")
def _flatten(ins, a):
    x = T(ins[0])
    axis = _axis(a.get("axis", 1), x.ndim)
    lead = int(np.prod([int(d) for d in x.shape[:axis]]))
    return x.reshape(lead, -1)


@onnx_op("Transpose", host=lambda ins, a: np.transpose(ins[0], a.get("perm")))
def _transpose(ins, a):
    x = T(ins[0])
    perm = a.get("perm") or list(range(x.ndim))[::-1]
    return x.permute(*perm)


@onnx_op("Concat", host=lambda ins, a: np.concatenate([i for i in ins if i is not None], axis=a["axis"]))
def _concat(ins, a):
    xs = [T(x) for x in ins if x is not None]
    return ops.cat(xs, dim=a["axis"])


def _unsqueeze_axes(ins, a):
    return ints(ins[1], "Unsqueeze axes") if len(ins) > 1 and ins[1] is not None else list(a["axes"])


def _unsqueeze_np(ins, a):
    x = ins[0]
    nd = x.ndim + len(_unsqueeze_axes(ins, a))
    for ax in sorted(_axis(d, nd) for d in _unsqueeze_axes(ins, a)):
        x = np.expand_dims(x, ax)
    return x


@onnx_op("Unsqueeze", host=_unsqueeze_np)
def _unsqueeze(ins, a):
    x = T(ins[0])
    nd = x.ndim + len(_unsqueeze_axes(ins, a))
    for ax in sorted(_axis(d, nd) for d in _unsqueeze_axes(ins, a)):
        x = x.unsqueeze(ax)
    return x


def _squeeze_axes(ins, a, nd):
    if len(ins) > 1 and ins[1] is not None:
        return tuple(_axis(d, nd) for d in ints(ins[1], "Squeeze axes"))
    return tuple(_axis(d, nd) for d in a["axes"]) if "axes" in a else None


@onnx_op("Squeeze", host=lambda ins, a: np.squeeze(ins[0], _squeeze_axes(ins, a, ins[0].ndim)))
def _squeeze(ins, a):
    x = T(ins[0])
    axes = _squeeze_axes(ins, a, x.ndim)
    return x.squeeze() if axes is None else x.squeeze(axes)


def _slices(shape, ins):
    starts, ends = ints(ins[1], "Slice starts"), ints(ins[2], "Slice ends")
    axes = ints(ins[3], "Slice axes") if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = ints(ins[4], "Slice steps") if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * len(shape)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = _axis(ax, len(shape))
        n = int(shape[ax])
        # ONNX clamps out-of-range bounds; Python slices do the same, except for the INT64 sentinels
        s = max(min(s, n), -n - 1) if st > 0 else max(min(s, n - 1), -n)
        if st > 0:
            e = max(min(e, n), -n)
            index[ax] = slice(s, e, st)
        else:
            index[ax] = slice(s, None if e < -n else e, st)
    return tuple(index)


@onnx_op("Slice", host=lambda ins, a: ins[0][_slices(ins[0].shape, ins)])
def _slice(ins, a):
    x = T(ins[0])
    index = _slices(tuple(x.shape), ins)
    if any(s.step is not None and s.step < 0 for s in index):
        flips = [i for i, s in enumerate(index) if s.step is not None and s.step < 0]
        n = [int(x.shape[i]) for i in flips]
        x = x.flip(flips)
        index = list(index)
        for i, size in zip(flips, n):
            s = index[i]  # reversed: position p becomes size - 1 - p
            start = size - 1 - (s.start % size if s.start is not None and s.start < 0 else s.start)
            stop = None if s.stop is None else size - 1 - (s.stop % size if s.stop < 0 else s.stop)
            index[i] = slice(start, stop, -s.step)
        index = tuple(index)
    return x[index]


def _gather_np(ins, a):
    x, idx = ins
    axis = _axis(a.get("axis", 0), x.ndim)
    return np.take(x, idx, axis=axis)


@onnx_op("Gather", host=_gather_np)
def _gather(ins, a):
    x, idx = T(ins[0]), ins[1]
    axis = _axis(a.get("axis", 0), x.ndim)
    n = int(x.shape[axis])
    if isinstance(idx, np.ndarray):
        idx = np.where(idx < 0, idx + n, idx)
        if idx.ndim == 0:
            return x[(slice(None),) * axis + (int(idx),)]
        flat = x.index_select(axis, T(idx.reshape(-1).astype(np.int64)))
    else:
        idx = ops.where(idx < 0, idx + n, idx)
        flat = x.index_select(axis, idx.reshape(-1).long())
    shape = tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:])
    return flat.reshape(shape)


@onnx_op("GatherElements")
def _gather_elements(ins, a):
    x, idx = T(ins[0]), T(ins[1])
    axis = _axis(a.get("axis", 0), x.ndim)
    idx = ops.where(idx < 0, idx + int(x.shape[axis]), idx)
    return ops.gather(x, axis, idx.long())


@onnx_op("Split")
def _split(ins, a, n_out=None):
    x = T(ins[0])
    axis = _axis(a.get("axis", 0), x.ndim)
    if len(ins) > 1 and ins[1] is not None:
        sizes = ints(ins[1], "Split sizes")
    elif "split" in a:
        sizes = list(a["split"])
    else:
        n = a.get("num_outputs") or a["_n_outputs"]
        size = -(-int(x.shape[axis]) // n)
        sizes = [min(size, int(x.shape[axis]) - i * size) for i in range(n)]
    return list(ops.split(x, sizes, dim=axis))


def _expand_shape(x_shape, shape):
    return tuple(np.broadcast_shapes(tuple(int(d) for d in x_shape), tuple(shape)))


@onnx_op("Expand", host=lambda ins, a: np.broadcast_to(ins[0], _expand_shape(ins[0].shape, ints(ins[1], "shape"))).copy())
def _expand(ins, a):
    x = T(ins[0])
    shape = _expand_shape(x.shape, ints(ins[1], "Expand shape"))
    if x.ndim < len(shape):
        x = x.reshape((1,) * (len(shape) - x.ndim) + tuple(x.shape))
    return x.expand(*shape)


@onnx_op("Tile")
def _tile(ins, a):
    return T(ins[0]).repeat(*ints(ins[1], "Tile repeats"))


@onnx_op("Pad")
def _pad(ins, a):
    x = T(ins[0])
    mode = a.get("mode", "constant")
    if mode != "constant":
        raise NotImplementedError(f"ember.onnx.load: Pad mode {mode!r} is not supported (only 'constant')")
    pads = ints(ins[1], "Pad pads") if len(ins) > 1 else list(a["pads"])
    value = float(np.asarray(ins[2]).reshape(())) if len(ins) > 2 and ins[2] is not None else 0.0
    nd = x.ndim
    axes = ints(ins[3], "Pad axes") if len(ins) > 3 and ins[3] is not None else list(range(nd))
    full = [0] * (2 * nd)
    for k, ax in enumerate(axes):
        ax = _axis(ax, nd)
        full[ax], full[nd + ax] = pads[k], pads[len(axes) + k]
    torch_pad = []
    for ax in reversed(range(nd)):
        torch_pad += [full[ax], full[nd + ax]]
    return F.pad(x, tuple(torch_pad), value=value)


def _range_np(ins, a):
    start, limit, delta = (np.asarray(v).reshape(()) for v in ins)
    return np.arange(start, limit, delta, dtype=np.asarray(ins[0]).dtype)


@onnx_op("Range", host=_range_np)
def _range(ins, a):
    start, limit, delta = (np.asarray(v.numpy() if isinstance(v, Tensor) else v).reshape(()) for v in ins)
    return np.arange(start, limit, delta, dtype=start.dtype)


def _constant_of_shape(ins, a):
    value = a.get("value")
    value = np.zeros(1, np.float32) if value is None else value
    return np.full(ints(ins[0], "ConstantOfShape shape"), value.reshape(-1)[0], dtype=value.dtype)


FROM_ONNX["ConstantOfShape"] = HOST["ConstantOfShape"] = _constant_of_shape


def _constant(ins, a):
    for key, cast in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return np.asarray(a[key], dtype=cast) if cast is not None else np.asarray(a[key])
    raise NotImplementedError(f"ember.onnx.load: Constant with attributes {sorted(a)} is not supported")


FROM_ONNX["Constant"] = HOST["Constant"] = _constant


@onnx_op("Trilu")
def _trilu(ins, a):
    x = T(ins[0])
    k = int(np.asarray(ins[1])) if len(ins) > 1 and ins[1] is not None else 0
    return ops.triu(x, k) if a.get("upper", 1) else ops.tril(x, k)


# --- reductions ------------------------------------------------------------------------------
def _reduce_axes(ins, a, nd):
    axes = ints(ins[1], "axes") if len(ins) > 1 and ins[1] is not None else a.get("axes")
    if not axes:
        return None if not a.get("noop_with_empty_axes", 0) else ()
    return tuple(_axis(d, nd) for d in axes)


def _reduction(fn):
    def run(ins, a):
        x = T(ins[0])
        axes = _reduce_axes(ins, a, x.ndim)
        if axes == ():
            return x
        axes = tuple(range(x.ndim)) if axes is None else axes
        return fn(x, axes, bool(a.get("keepdims", 1)))

    return run


FROM_ONNX["ReduceSum"] = _reduction(lambda x, d, k: x.sum(d, keepdim=k))
FROM_ONNX["ReduceMean"] = _reduction(lambda x, d, k: x.mean(d, keepdim=k))
FROM_ONNX["ReduceMax"] = _reduction(lambda x, d, k: x.amax(d, keepdim=k))
FROM_ONNX["ReduceMin"] = _reduction(lambda x, d, k: x.amin(d, keepdim=k))
FROM_ONNX["ReduceProd"] = _reduction(lambda x, d, k: x.prod(d, keepdim=k) if len(d) == 1 else
                                     x.reshape(*[s for i, s in enumerate(x.shape) if i not in d], -1).prod(-1))
FROM_ONNX["ReduceLogSumExp"] = _reduction(lambda x, d, k: ops.logsumexp(x, d, keepdim=k))
FROM_ONNX["ReduceL2"] = _reduction(lambda x, d, k: (x * x).sum(d, keepdim=k).sqrt())
HOST["ReduceProd"] = lambda ins, a: np.prod(ins[0], axis=_reduce_axes(ins, a, ins[0].ndim),
                                            keepdims=bool(a.get("keepdims", 1)))


def _arg_for(op_type):
    def run(ins, a):
        x = T(ins[0])
        axis = _axis(a.get("axis", 0), x.ndim)
        keep = bool(a.get("keepdims", 1))
        if a.get("select_last_index", 0):
            x = x.flip(axis)
            idx = ops.argmax(x, axis, keepdim=keep) if op_type == "ArgMax" else ops.argmin(x, axis, keepdim=keep)
            return int(x.shape[axis]) - 1 - idx
        return ops.argmax(x, axis, keepdim=keep) if op_type == "ArgMax" else ops.argmin(x, axis, keepdim=keep)

    return run


FROM_ONNX["ArgMax"], FROM_ONNX["ArgMin"] = _arg_for("ArgMax"), _arg_for("ArgMin")


@onnx_op("CumSum")
def _cumsum(ins, a):
    x = T(ins[0])
    axis = _axis(int(np.asarray(ins[1])), x.ndim)
    if a.get("exclusive", 0) or a.get("reverse", 0):
        raise NotImplementedError("ember.onnx.load: CumSum with exclusive or reverse is not supported")
    return ops.cumsum(x, axis)


@onnx_op("TopK")
def _topk(ins, a):
    x = T(ins[0])
    k = ints(ins[1], "TopK k")[0]
    axis = _axis(a.get("axis", -1), x.ndim)
    values, idx = ops.topk(x, k, dim=axis, largest=bool(a.get("largest", 1)), sorted=bool(a.get("sorted", 1)))
    return [values, idx.long()]


# --- networks --------------------------------------------------------------------------------
@onnx_op("MatMul")
def _matmul(ins, a):
    return ops.matmul(T(ins[0]), T(ins[1]))


@onnx_op("Gemm")
def _gemm(ins, a):
    x, w = T(ins[0]), T(ins[1])
    if a.get("transA", 0):
        x = x.t()
    if a.get("transB", 0):
        w = w.t()
    y = ops.matmul(x, w)
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if alpha != 1.0:
        y = y * alpha
    if len(ins) > 2 and ins[2] is not None:
        c = T(ins[2])
        y = y + (c * beta if beta != 1.0 else c)
    return y


@onnx_op("Einsum")
def _einsum(ins, a):
    return ops.einsum(a["equation"], *[T(x) for x in ins])


def _spatial_pads(x, pads, nd_spatial, value=0.0):
    """Symmetric pads as a tuple for the op, else the input padded first (and zeros for the op)."""
    pads = list(pads) if pads else [0] * (2 * nd_spatial)
    begin, end = pads[:nd_spatial], pads[nd_spatial:]
    if begin == end:
        return x, tuple(begin)
    torch_pad = []
    for b, e in zip(reversed(begin), reversed(end)):
        torch_pad += [b, e]
    return F.pad(x, tuple(torch_pad), value=value), (0,) * nd_spatial


def _check_auto_pad(a, op):
    auto = a.get("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID"):
        raise NotImplementedError(f"ember.onnx.load: {op} with auto_pad={auto} is not supported (explicit pads are)")


@onnx_op("Conv")
def _conv(ins, a):
    _check_auto_pad(a, "Conv")
    x, w = T(ins[0]), T(ins[1])
    b = T(ins[2]) if len(ins) > 2 else None
    nd = x.ndim - 2
    if nd not in (1, 2):
        raise NotImplementedError(f"ember.onnx.load: Conv over {nd} spatial dimensions is not supported (1 or 2 are)")
    if nd == 1:
        x, w = x.unsqueeze(2), w.unsqueeze(2)
        pads = a.get("pads", [0, 0])
        a = dict(a, pads=[0, pads[0], 0, pads[1]], strides=[1] + list(a.get("strides", [1])),
                 dilations=[1] + list(a.get("dilations", [1])))
    x, padding = _spatial_pads(x, a.get("pads"), 2)
    y = F.conv2d(x, w, b, stride=tuple(a.get("strides", (1, 1))), padding=padding,
                 dilation=tuple(a.get("dilations", (1, 1))), groups=a.get("group", 1))
    return y.squeeze(2) if nd == 1 else y


@onnx_op("ConvTranspose")
def _conv_transpose(ins, a):
    _check_auto_pad(a, "ConvTranspose")
    x, w = T(ins[0]), T(ins[1])
    b = T(ins[2]) if len(ins) > 2 else None
    if x.ndim != 4:
        raise NotImplementedError("ember.onnx.load: ConvTranspose is supported over 2 spatial dimensions only")
    pads = a.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise NotImplementedError("ember.onnx.load: ConvTranspose with asymmetric pads is not supported")
    return F.conv_transpose2d(x, w, b, stride=tuple(a.get("strides", (1, 1))), padding=tuple(pads[:2]),
                              output_padding=tuple(a.get("output_padding", (0, 0))), groups=a.get("group", 1),
                              dilation=tuple(a.get("dilations", (1, 1))))


@onnx_op("MaxPool")
def _maxpool(ins, a):
    _check_auto_pad(a, "MaxPool")
    x = T(ins[0])
    if x.ndim != 4:
        raise NotImplementedError("ember.onnx.load: MaxPool is supported over 2 spatial dimensions only")
    x, padding = _spatial_pads(x, a.get("pads"), 2, value=float("-inf"))
    k = tuple(a["kernel_shape"])
    return F.max_pool2d(x, k, stride=tuple(a.get("strides", (1, 1))), padding=padding,
                        dilation=tuple(a.get("dilations", (1, 1))), ceil_mode=bool(a.get("ceil_mode", 0)))


@onnx_op("AveragePool")
def _avgpool(ins, a):
    _check_auto_pad(a, "AveragePool")
    x = T(ins[0])
    if x.ndim != 4:
        raise NotImplementedError("ember.onnx.load: AveragePool is supported over 2 spatial dimensions only")
    pads = a.get("pads") or [0, 0, 0, 0]
    if pads[:2] != pads[2:]:
        raise NotImplementedError("ember.onnx.load: AveragePool with asymmetric pads is not supported")
    return F.avg_pool2d(x, tuple(a["kernel_shape"]), stride=tuple(a.get("strides", (1, 1))), padding=tuple(pads[:2]),
                        ceil_mode=bool(a.get("ceil_mode", 0)), count_include_pad=bool(a.get("count_include_pad", 0)))


@onnx_op("GlobalAveragePool")
def _gap(ins, a):
    x = T(ins[0])
    return x.mean(tuple(range(2, x.ndim)), keepdim=True)


@onnx_op("GlobalMaxPool")
def _gmp(ins, a):
    x = T(ins[0])
    return x.amax(tuple(range(2, x.ndim)), keepdim=True)


@onnx_op("BatchNormalization")
def _batchnorm(ins, a):
    if a.get("training_mode", 0):
        raise NotImplementedError("ember.onnx.load: BatchNormalization in training mode is not supported")
    x, scale, bias, mean, var = (T(v) for v in ins[:5])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = (var + a.get("epsilon", 1e-5)).rsqrt() * scale
    return x * inv.reshape(shape) + (bias - mean * inv).reshape(shape)


@onnx_op("InstanceNormalization")
def _instancenorm(ins, a):
    x, scale, bias = (T(v) for v in ins[:3])
    return F.instance_norm(x, weight=scale, bias=bias, eps=a.get("epsilon", 1e-5))


@onnx_op("LayerNormalization")
def _layernorm(ins, a):
    x = T(ins[0])
    axis = _axis(a.get("axis", -1), x.ndim)
    shape = tuple(int(d) for d in x.shape[axis:])
    w = T(ins[1])
    b = T(ins[2]) if len(ins) > 2 else None
    eps = a.get("epsilon", 1e-5)
    y = F.layer_norm(x, shape, w, b, eps)
    if a.get("_n_outputs", 1) == 1:
        return y
    dims = tuple(range(axis, x.ndim))
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    return [y, mean, (var + eps).rsqrt()]


def _softmax_for(op_type):
    def run(ins, a):
        x = T(ins[0])
        axis = a.get("axis", -1)
        return F.softmax(x, dim=axis) if op_type == "Softmax" else F.log_softmax(x, dim=axis)

    return run


FROM_ONNX["Softmax"], FROM_ONNX["LogSoftmax"] = _softmax_for("Softmax"), _softmax_for("LogSoftmax")


@onnx_op("Dropout")
def _dropout(ins, a):
    x = T(ins[0])
    return [x, ops.ones_like(x, dtype=dtypes.bool_)] if a.get("_n_outputs", 1) > 1 else x


@onnx_op("ScatterElements")
def _scatter_elements(ins, a):
    x, idx, src = T(ins[0]), T(ins[1]), T(ins[2])
    axis = _axis(a.get("axis", 0), x.ndim)
    idx = ops.where(idx < 0, idx + int(x.shape[axis]), idx).long()
    reduction = a.get("reduction", "none")
    if reduction == "none":
        return x.scatter(axis, idx, src)
    if reduction == "add":
        return x.scatter_add(axis, idx, src)
    raise NotImplementedError(f"ember.onnx.load: ScatterElements with reduction={reduction!r} is not supported")


@onnx_op("NegativeLogLikelihoodLoss")
def _nll_loss(ins, a):
    weight = T(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    ignore = a.get("ignore_index", -100)
    return F.nll_loss(T(ins[0]), T(ins[1]).long(), weight=weight, ignore_index=ignore,
                      reduction=a.get("reduction", "mean"))


@onnx_op("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(ins, a):
    logp = F.log_softmax(T(ins[0]), 1)
    weight = T(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    loss = F.nll_loss(logp, T(ins[1]).long(), weight=weight, ignore_index=a.get("ignore_index", -100),
                      reduction=a.get("reduction", "mean"))
    return [loss, logp]


@onnx_op("OneHot")
def _onehot(ins, a):
    idx, depth, values = T(ins[0]).long(), int(np.asarray(ins[1]).reshape(())), T(ins[2])
    idx = ops.where(idx < 0, idx + depth, idx)
    hot = F.one_hot(idx, depth)
    axis = a.get("axis", -1)
    if axis != -1:
        hot = hot.movedim(-1, axis)
    return ops.where(hot.bool(), values[1], values[0])

