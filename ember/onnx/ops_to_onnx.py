"""The table from Ember ops to ONNX: one function per op, `fn(ctx, node) -> ONNX name(s) of its outputs`.

Each function reads the node's inputs (values or Python scalars) and attributes and appends ONNX
nodes through the `ExportContext`. Operands are cast to the dtype Ember computes in, since ONNX
operators do not promote types. A multi-output function returns a list with None for outputs it
does not produce (an error only if something reads them).
"""

from __future__ import annotations

import math

import numpy as np

from ember.graph.ir import Value
from ember.ops._rules import binary_dtype, float_of, norm_dim, norm_dims

TO_ONNX: dict = {}
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def mapping(*names):
    """Register the decorated function as the ONNX mapping of the named ops."""

    def deco(fn):
        for n in names:
            TO_ONNX[n] = fn
        return fn

    return deco


def _x(node, i=0):
    return node.inputs[i]


def _out(node, i=0):
    return node.outputs[i]


def _unsupported(ctx, what: str):
    n = ctx.node
    return NotImplementedError(f"ember.onnx.export: op '{n.op_name}' (node %{n.id}) {what}")


# --- elementwise, unary ------------------------------------------------------------------
_UNARY = {
    "abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu", "floor": "Floor", "ceil": "Ceil",
    "round": "Round", "sign": "Sign", "reciprocal": "Reciprocal", "erf": "Erf", "logical_not": "Not",
    "isnan": "IsNaN", "isinf": "IsInf", "bitwise_not": "BitwiseNot",
}


def _unary_in(ctx, node):
    """Input 0 in the dtype the op computes in (float ops on integer tensors compute in float)."""
    x, out = _x(node), _out(node)
    if node.op_name == "logical_not":
        return ctx.input(x, np.bool_)
    if out.dtype == np.bool_:
        return ctx.input(x)
    return ctx.input(x, out.dtype)


@mapping(*_UNARY)
def _unary(ctx, node):
    return ctx.add(_UNARY[node.op_name], [_unary_in(ctx, node)])


def _scalar(ctx, value, dtype):
    return ctx.const(np.asarray(value, dtype=dtype), "scalar")


@mapping("rsqrt")
def _rsqrt(ctx, node):
    return ctx.add("Reciprocal", [ctx.add("Sqrt", [_unary_in(ctx, node)])])


@mapping("square")
def _square(ctx, node):
    x = _unary_in(ctx, node)
    return ctx.add("Mul", [x, x])


@mapping("log1p", "expm1", "log2", "log10", "exp2", "trunc", "frac", "isfinite", "silu")
def _composite_unary(ctx, node):
    x, dt, name = _unary_in(ctx, node), _out(node).dtype, node.op_name
    if name == "log1p":
        return ctx.add("Log", [ctx.add("Add", [x, _scalar(ctx, 1, dt)])])
    if name == "expm1":
        return ctx.add("Sub", [ctx.add("Exp", [x]), _scalar(ctx, 1, dt)])
    if name in ("log2", "log10"):
        return ctx.add("Div", [ctx.add("Log", [x]), _scalar(ctx, math.log(2 if name == "log2" else 10), dt)])
    if name == "exp2":
        return ctx.add("Pow", [_scalar(ctx, 2, dt), x])
    if name in ("trunc", "frac"):
        if dt.kind != "f":
            return ctx.add("Identity", [x]) if name == "trunc" else ctx.add("Sub", [x, x])
        t = ctx.add("Mul", [ctx.add("Sign", [x]), ctx.add("Floor", [ctx.add("Abs", [x])])])
        return t if name == "trunc" else ctx.add("Sub", [x, t])
    if name == "isfinite":
        x = ctx.input(_x(node))
        if _x(node).dtype.kind != "f":
            return ctx.add("Equal", [x, x])  # integers are always finite
        return ctx.add("Not", [ctx.add("Or", [ctx.add("IsNaN", [x]), ctx.add("IsInf", [x])])])
    return ctx.add("Mul", [x, ctx.add("Sigmoid", [x])])  # silu


@mapping("gelu")
def _gelu(ctx, node):
    x, dt = _unary_in(ctx, node), _out(node).dtype
    approx = node.attrs.get("approximate", "none")
    if ctx.opset >= 20:
        return ctx.add("Gelu", [x], approximate=approx)
    half = ctx.add("Mul", [x, _scalar(ctx, 0.5, dt)])
    if approx == "tanh":
        cube = ctx.add("Mul", [ctx.add("Mul", [x, x]), x])
        inner = ctx.add("Add", [x, ctx.add("Mul", [cube, _scalar(ctx, 0.044715, dt)])])
        t = ctx.add("Tanh", [ctx.add("Mul", [inner, _scalar(ctx, math.sqrt(2 / math.pi), dt)])])
    else:
        t = ctx.add("Erf", [ctx.add("Mul", [x, _scalar(ctx, 1 / math.sqrt(2), dt)])])
    return ctx.add("Mul", [half, ctx.add("Add", [t, _scalar(ctx, 1, dt)])])


@mapping("leaky_relu")
def _leaky_relu(ctx, node):
    return ctx.add("LeakyRelu", [_unary_in(ctx, node)], alpha=float(node.attrs.get("negative_slope", 0.01)))


@mapping("elu")
def _elu(ctx, node):
    return ctx.add("Elu", [_unary_in(ctx, node)], alpha=float(node.attrs.get("alpha", 1.0)))


@mapping("softplus")
def _softplus(ctx, node):
    x, dt = _unary_in(ctx, node), _out(node).dtype
    beta, threshold = float(node.attrs.get("beta", 1.0)), float(node.attrs.get("threshold", 20.0))
    bx = ctx.add("Mul", [x, _scalar(ctx, beta, dt)]) if beta != 1 else x
    soft = ctx.add("Softplus", [bx])
    if beta != 1:
        soft = ctx.add("Div", [soft, _scalar(ctx, beta, dt)])
    return ctx.add("Where", [ctx.add("Greater", [bx, _scalar(ctx, threshold, dt)]), x, soft])


@mapping("tf_relu6")
def _relu6(ctx, node):
    dt = _out(node).dtype
    return ctx.add("Clip", [ctx.input(_x(node), dt), _scalar(ctx, 0, dt), _scalar(ctx, 6, dt)])


# --- elementwise, binary -----------------------------------------------------------------
_BINARY = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min",
    "tf_maximum": "Max", "tf_minimum": "Min", "eq": "Equal", "lt": "Less", "le": "LessOrEqual",
    "gt": "Greater", "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
    "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor", "fmod": "Mod",
}


def _compute_dtype(node):
    a, b = node.inputs[0], node.inputs[1]
    if node.op_name.startswith("logical_"):
        return np.dtype(np.bool_)
    if node.op_name.startswith("tf_"):
        return _out(node).dtype
    dtype = binary_dtype(a, b)
    return float_of(dtype) if getattr(node.op, "result", None) == "float" else np.dtype(dtype)


@mapping(*_BINARY, "ne", "remainder", "floor_divide")
def _binary(ctx, node):
    dt = _compute_dtype(node)
    a, b = ctx.input(node.inputs[0], dt), ctx.input(node.inputs[1], dt)
    name = node.op_name
    if name == "ne":
        return ctx.add("Not", [ctx.add("Equal", [a, b])])
    if name == "fmod":
        return ctx.add("Mod", [a, b], fmod=1)  # C's fmod: the dividend's sign, as torch.fmod
    if name in ("remainder", "floor_divide"):
        if dt.kind == "f":
            q = ctx.add("Floor", [ctx.add("Div", [a, b])])
            return q if name == "floor_divide" else ctx.add("Sub", [a, ctx.add("Mul", [q, b])])
        r = ctx.add("Mod", [a, b])  # integer Mod with fmod=0 takes the divisor's sign, as Python's %
        return r if name == "remainder" else ctx.add("Div", [ctx.add("Sub", [a, r]), b])
    return ctx.add(_BINARY[name], [a, b])


@mapping("where")
def _where(ctx, node):
    cond, a, b = node.inputs
    dt = _out(node).dtype
    return ctx.add("Where", [ctx.input(cond, np.bool_), ctx.input(a, dt), ctx.input(b, dt)])


@mapping("clamp")
def _clamp(ctx, node):
    dt = _out(node).dtype
    lo, hi = node.attrs.get("min"), node.attrs.get("max")
    ins = [ctx.input(_x(node), dt), "" if lo is None else _scalar(ctx, lo, dt), "" if hi is None else _scalar(ctx, hi, dt)]
    while ins[-1] == "":
        ins.pop()
    return ctx.add("Clip", ins)


@mapping("clamp_tensor")
def _clamp_tensor(ctx, node):
    dt = _out(node).dtype
    x, lo, hi = node.inputs
    y = ctx.input(x, dt)
    if lo is not None:
        y = ctx.add("Max", [y, ctx.input(lo, dt)])
    if hi is not None:
        y = ctx.add("Min", [y, ctx.input(hi, dt)])
    return y


@mapping("addcmul", "addcdiv")
def _addc(ctx, node):
    dt = _out(node).dtype
    x, t1, t2 = (ctx.input(v, dt) for v in node.inputs[:3])
    value = node.inputs[3] if len(node.inputs) > 3 else node.attrs.get("value", 1)
    prod = ctx.add("Mul" if node.op_name == "addcmul" else "Div", [t1, t2])
    if isinstance(value, Value) or value != 1:
        prod = ctx.add("Mul", [prod, ctx.input(value, dt)])
    return ctx.add("Add", [x, prod])


@mapping("channel_affine")
def _channel_affine(ctx, node):
    x, scale, shift = node.inputs[:3]  # a fourth: the residual the jit folded in
    residual = node.inputs[3] if len(node.inputs) > 3 else None
    return _affine(ctx, node, ctx.input(x, _out(node).dtype), len(x.shape), scale, shift, residual)


@mapping("conv2d_affine")
def _conv2d_affine(ctx, node):
    # the jit's conv2d + channel_affine (graph/passes/fold_activation.py): the two mappings in turn
    x, w, scale, shift = node.inputs
    return _affine(ctx, node, _conv2d(ctx, node), len(x.shape), scale, shift)


def _affine(ctx, node, y, ndim: int, scale, shift, residual=None):
    """channel_affine's ONNX nodes after `y` (an (N, C, ...) tensor of `ndim` dims), its folded residual and
    activation too."""
    dt = _out(node).dtype
    per_channel = ctx.ints([-1] + [1] * (ndim - 2), "channel_shape")  # (C, 1, 1) against (N, C, H, W)
    if scale is not None:  # None: a convolution's bias alone
        y = ctx.add("Mul", [y, ctx.add("Reshape", [ctx.input(scale, dt), per_channel])])
    if shift is not None:
        y = ctx.add("Add", [y, ctx.add("Reshape", [ctx.input(shift, dt), per_channel])])
    if residual is not None:
        y = ctx.add("Add", [y, ctx.input(residual, dt)])
    activation = node.attrs.get("activation")  # folded by the jit's fold_activation pass
    if activation is None:
        return y
    if activation[0] == "relu":
        return ctx.add("Relu", [y])
    return ctx.add("Clip", [y, _scalar(ctx, activation[1], dt), _scalar(ctx, activation[2], dt)])


@mapping("batch_norm_scale_shift")
def _batch_norm_scale_shift(ctx, node):
    mean, var, w, b = node.inputs
    dt = _out(node).dtype
    scale = ctx.add("Reciprocal", [ctx.add("Sqrt", [ctx.add("Add", [ctx.input(var, dt),
                                                                    _scalar(ctx, node.attrs["eps"], dt)])])])
    if w is not None:
        scale = ctx.add("Mul", [scale, ctx.input(w, dt)])
    shift = ctx.add("Mul", [ctx.add("Neg", [ctx.input(mean, dt)]), scale])
    if b is not None:
        shift = ctx.add("Add", [shift, ctx.input(b, dt)])
    return [scale, shift]


@mapping("lerp")
def _lerp(ctx, node):
    dt = _out(node).dtype
    s, e, w = (ctx.input(v, dt) for v in node.inputs)
    return ctx.add("Add", [s, ctx.add("Mul", [w, ctx.add("Sub", [e, s])])])


# --- type and identity -------------------------------------------------------------------
@mapping("cast")
def _cast(ctx, node):
    return ctx.add("Cast", [ctx.input(_x(node))], to=ctx.dtype_code(_out(node).dtype))


# check_indices is ember.v1's run-time bounds check: ONNX has no assertions, so the indices pass through.
@mapping("clone", "contiguous", "stop_gradient", "read_variable", "to_device", "placeholder_with_default",
         "check_indices")
def _identity(ctx, node):
    x = _x(node)
    if not isinstance(x, Value):
        return ctx.input(x, _out(node).dtype)
    return ctx.add("Identity", [ctx.input(x)])


# --- shapes ------------------------------------------------------------------------------
@mapping("reshape", "view")
def _reshape(ctx, node):
    shape = node.attrs["shape"]
    allowzero = 1 if any(type(d) is int and d == 0 for d in shape) else None
    return ctx.add("Reshape", [ctx.input(_x(node)), ctx.ints(shape)], allowzero=allowzero)


@mapping("expand")
def _expand(ctx, node):
    return ctx.add("Expand", [ctx.input(_x(node)), ctx.ints(_out(node).shape)])


@mapping("sum_to_size")
def _sum_to_size(ctx, node):
    x, out = _x(node), _out(node)
    lead = len(x.shape) - len(out.shape)
    axes = list(range(lead)) + [lead + i for i, d in enumerate(out.shape) if d == 1 and x.shape[lead + i] != 1]
    y = _reduce(ctx, "ReduceSum", ctx.input(x), axes, keepdims=True)
    return ctx.add("Reshape", [y, ctx.ints(out.shape)])


@mapping("unsqueeze")
def _unsqueeze(ctx, node):
    x = _x(node)
    d = node.attrs["dim"] % (len(x.shape) + 1)
    return ctx.add("Unsqueeze", [ctx.input(x), ctx.ints([d], "axes")])


@mapping("squeeze")
def _squeeze(ctx, node):
    x = _x(node)
    axes = node.op._dims(x, node.attrs.get("dim"))
    if not axes:
        return ctx.add("Identity", [ctx.input(x)])
    return ctx.add("Squeeze", [ctx.input(x), ctx.ints(axes, "axes")])


@mapping("permute")
def _permute(ctx, node):
    nd = len(_x(node).shape)
    return ctx.add("Transpose", [ctx.input(_x(node))], perm=[d % nd for d in node.attrs["dims"]])


@mapping("cat")
def _cat(ctx, node):
    dt = _out(node).dtype
    xs = [x for x in node.inputs if not (isinstance(x, Value) and x.shape == (0,) and len(_out(node).shape) != 1)]
    dim = node.attrs.get("dim", 0) % len(_out(node).shape)
    return ctx.add("Concat", [ctx.input(x, dt) for x in xs], axis=dim)


@mapping("split")
def _split(ctx, node):
    x = _x(node)
    sizes, dim, squeeze = node.attrs["sizes"], node.attrs["dim"], node.attrs["squeeze"]
    dim %= len(x.shape)
    if len(sizes) == 1:
        y = ctx.add("Identity", [ctx.input(x)])
        return [ctx.add("Squeeze", [y, ctx.ints([dim], "axes")]) if squeeze else y]
    parts = ctx.add("Split", [ctx.input(x), ctx.ints(sizes, "split")], n_out=len(sizes), axis=dim)
    if squeeze:
        axes = ctx.ints([dim], "axes")
        parts = [ctx.add("Squeeze", [p, axes]) for p in parts]
    return parts


@mapping("flip")
def _flip(ctx, node):
    x = _x(node)
    nd = len(x.shape)
    dims = [d % nd for d in node.attrs["dims"]]
    n = len(dims)
    return ctx.add("Slice", [ctx.input(x), ctx.ints([-1] * n, "starts"), ctx.ints([_INT64_MIN] * n, "ends"),
                             ctx.ints(dims, "axes"), ctx.ints([-1] * n, "steps")])


@mapping("repeat")
def _repeat(ctx, node):
    x, reps = _x(node), list(node.attrs["reps"])
    y = ctx.input(x)
    extra = len(reps) - len(x.shape)
    if extra > 0:
        y = ctx.add("Reshape", [y, ctx.ints([1] * extra + list(x.shape))])
    return ctx.add("Tile", [y, ctx.ints(reps, "repeats")])


@mapping("roll")
def _roll(ctx, node):
    x = _x(node)
    shifts, dims = node.attrs["shifts"], node.attrs["dims"]
    y = ctx.input(x)
    if dims is None or dims == () or dims == []:
        flat = ctx.add("Reshape", [y, ctx.ints([-1])])
        out = _roll1(ctx, flat, shifts if isinstance(shifts, int) else shifts[0], 0, math.prod(x.shape))
        return ctx.add("Reshape", [out, ctx.ints(x.shape)])
    shifts = (shifts,) if isinstance(shifts, int) else shifts
    dims = (dims,) if isinstance(dims, int) else dims
    for s, d in zip(shifts, dims):
        d %= len(x.shape)
        y = _roll1(ctx, y, s, d, x.shape[d])
    return y


def _roll1(ctx, y, shift, dim, size):
    shift %= size
    if shift == 0:
        return y
    axes = ctx.ints([dim], "axes")
    tail = ctx.add("Slice", [y, ctx.ints([size - shift]), ctx.ints([size]), axes])
    head = ctx.add("Slice", [y, ctx.ints([0]), ctx.ints([size - shift]), axes])
    return ctx.add("Concat", [tail, head], axis=dim)


@mapping("pad")
def _pad(ctx, node):
    x = _x(node)
    nd = len(x.shape)
    pad = node.attrs["pad"]
    begins, ends = [0] * nd, [0] * nd
    for i in range(len(pad) // 2):
        begins[nd - 1 - i], ends[nd - 1 - i] = pad[2 * i], pad[2 * i + 1]
    value = node.attrs.get("value", 0)
    return ctx.add("Pad", [ctx.input(x), ctx.ints(begins + ends, "pads"), _scalar(ctx, value, x.dtype)])


@mapping("tril", "triu")
def _tri(ctx, node):
    k = ctx.ints([node.attrs.get("diagonal", 0)], "k")
    return ctx.add("Trilu", [ctx.input(_x(node)), ctx.add("Squeeze", [k])], upper=int(node.op_name == "triu"))


@mapping("full_like")
def _full_like(ctx, node):
    out = _out(node)
    value = np.asarray(node.attrs["value"], dtype=out.dtype).reshape(1)
    return ctx.add("ConstantOfShape", [ctx.ints(out.shape)],
                   value=ctx.onnx.numpy_helper.from_array(value, "value"))


@mapping("dynamic_shape")
def _dynamic_shape(ctx, node):
    return ctx.cast(ctx.add("Shape", [ctx.input(_x(node))]), np.int64, _out(node).dtype)


@mapping("element_count")
def _element_count(ctx, node):
    x = ctx.input(_x(node))
    dims = node.attrs["dims"]  # None: every dimension
    dims = None if dims is None else list(dims) if isinstance(dims, (tuple, list)) else [dims]
    if dims is None:
        sizes = ctx.add("Shape", [x])
    elif dims:
        sizes = ctx.add("Gather", [ctx.add("Shape", [x]), ctx.ints(dims, "dims")], axis=0)
    else:
        sizes = ctx.const(np.array([1], dtype=np.int64), "one")
    prod = ctx.add("ReduceProd", [sizes], keepdims=0)  # no axes: over the one dimension
    return ctx.cast(prod, np.int64, _out(node).dtype)


# --- reductions --------------------------------------------------------------------------
def _reduce(ctx, onnx_op, x: str, axes, keepdims: bool):
    axes = list(axes)
    if onnx_op == "ReduceSum" or ctx.opset >= 18:
        return ctx.add(onnx_op, [x, ctx.ints(axes, "axes")], keepdims=int(keepdims))
    return ctx.add(onnx_op, [x], axes=axes, keepdims=int(keepdims))


_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


@mapping(*_REDUCE)
def _reduction(ctx, node):
    x, out = _x(node), _out(node)
    axes = norm_dims(node.op_name, node.attrs.get("dim"), len(x.shape))
    keep = bool(node.attrs.get("keepdim", False))
    if not axes:  # a 0-d input (or an empty dim list in sum, meaning all dims)
        axes = tuple(range(len(x.shape)))
    dt = out.dtype if out.dtype != np.bool_ else x.dtype
    y = _reduce(ctx, _REDUCE[node.op_name], ctx.input(x, dt), axes, keep) if axes else ctx.add(
        "Identity", [ctx.input(x, dt)])
    return ctx.cast(y, dt, out.dtype)


@mapping("all", "any")
def _all_any(ctx, node):
    x = _x(node)
    axes = norm_dims(node.op_name, node.attrs.get("dim"), len(x.shape))
    as_int = ctx.cast(ctx.cast(ctx.input(x), x.dtype, np.bool_), np.bool_, np.int32)
    op = "ReduceMin" if node.op_name == "all" else "ReduceMax"
    y = _reduce(ctx, op, as_int, axes, bool(node.attrs.get("keepdim", False))) if axes else as_int
    return ctx.cast(y, np.int32, np.bool_)


@mapping("var")
def _var(ctx, node):
    x, out = _x(node), _out(node)
    axes = norm_dims("var", node.attrs.get("dim"), len(x.shape))
    keep = bool(node.attrs.get("keepdim", False))
    corr = node.attrs.get("correction", 1)
    xs = ctx.input(x, out.dtype)
    dev = ctx.add("Sub", [xs, _reduce(ctx, "ReduceMean", xs, axes, True)])
    ms = _reduce(ctx, "ReduceMean", ctx.add("Mul", [dev, dev]), axes, keep)
    n = math.prod(x.shape[a] for a in axes)
    if corr == 0:
        return ms
    return ctx.add("Mul", [ms, _scalar(ctx, n / max(n - corr, 0) if n > corr else np.inf, out.dtype)])


@mapping("argmax", "argmin")
def _argmax(ctx, node):
    x = _x(node)
    dim = node.attrs.get("dim")
    keep = int(bool(node.attrs.get("keepdim", False)))
    y = ctx.input(x)
    if dim is None:
        y = ctx.add("Reshape", [y, ctx.ints([-1])])
        dim, keep = 0, 0
        r = ctx.add("ArgMax" if node.op_name == "argmax" else "ArgMin", [y], axis=0, keepdims=0,
                    select_last_index=0)
        if node.attrs.get("keepdim", False):
            r = ctx.add("Reshape", [r, ctx.ints([1] * len(x.shape))])
        return r
    return ctx.add("ArgMax" if node.op_name == "argmax" else "ArgMin", [y], axis=norm_dim("argmax", dim, len(x.shape)),
                   keepdims=keep)


@mapping("max_dim", "min_dim")
def _max_dim(ctx, node):
    x = _x(node)
    dim = norm_dim(node.op_name, node.attrs["dim"], len(x.shape))
    keep = bool(node.attrs.get("keepdim", False))
    y = ctx.input(x)
    big = node.op_name == "max_dim"
    values = _reduce(ctx, "ReduceMax" if big else "ReduceMin", y, [dim], keep)
    idx = ctx.add("ArgMax" if big else "ArgMin", [y], axis=dim, keepdims=int(keep))
    return [values, ctx.cast(idx, np.int64, node.outputs[1].dtype)]


@mapping("cumsum")
def _cumsum(ctx, node):
    x, out = _x(node), _out(node)
    dim = norm_dim("cumsum", node.attrs["dim"], len(x.shape))
    return ctx.add("CumSum", [ctx.input(x, out.dtype), ctx.add("Squeeze", [ctx.ints([dim], "axis")])])


# --- linear algebra and networks ---------------------------------------------------------
@mapping("matmul")
def _matmul(ctx, node):
    dt = _out(node).dtype
    return ctx.add("MatMul", [ctx.input(node.inputs[0], dt), ctx.input(node.inputs[1], dt)])


@mapping("linear")
def _linear(ctx, node):
    x, w, b = node.inputs
    dt = _out(node).dtype
    if len(x.shape) == 2:
        ins = [ctx.input(x, dt), ctx.input(w, dt)] + ([ctx.input(b, dt)] if b is not None else [])
        return ctx.add("Gemm", ins, transB=1)
    y = ctx.add("MatMul", [ctx.input(x, dt), ctx.add("Transpose", [ctx.input(w, dt)], perm=[1, 0])])
    return y if b is None else ctx.add("Add", [y, ctx.input(b, dt)])


@mapping("einsum")
def _einsum(ctx, node):
    dt = _out(node).dtype
    return ctx.add("Einsum", [ctx.input(x, dt) for x in node.inputs], equation=node.attrs["equation"])


def _conv_pads(padding):
    top, bottom, left, right = padding
    return [top, left, bottom, right]


@mapping("conv2d")
def _conv2d(ctx, node):
    x, w = node.inputs[:2]
    a = node.attrs
    return ctx.add("Conv", [ctx.input(x), ctx.input(w)], strides=list(a["stride"]), pads=_conv_pads(a["padding"]),
                   dilations=list(a["dilation"]), group=int(a["groups"]), kernel_shape=list(w.shape[2:]))


@mapping("conv_transpose2d")
def _conv_transpose2d(ctx, node):
    x, w = node.inputs[:2]
    a = node.attrs
    pads = _conv_pads(a["padding"])
    out_hw = a["out_hw"]
    extra = []
    for i, (size, k) in enumerate(zip(x.shape[2:], w.shape[2:])):
        natural = (size - 1) * a["stride"][i] - pads[i] - pads[i + 2] + a["dilation"][i] * (k - 1) + 1
        extra.append(int(out_hw[i] - natural))
    if any(e < 0 for e in extra):
        raise _unsupported(ctx, f"has an output size {tuple(out_hw)} smaller than its padding gives")
    return ctx.add("ConvTranspose", [ctx.input(x), ctx.input(w)], strides=list(a["stride"]), pads=pads,
                   dilations=list(a["dilation"]), group=int(a["groups"]), kernel_shape=list(w.shape[2:]),
                   output_padding=extra if any(extra) else None)


@mapping("max_pool2d")
def _max_pool2d(ctx, node):
    a = node.attrs
    ph, pw = a["padding"]
    y = ctx.add("MaxPool", [ctx.input(_x(node))], kernel_shape=list(a["kernel"]), strides=list(a["stride"]),
                pads=[ph, pw, ph, pw], dilations=list(a["dilation"]), ceil_mode=int(bool(a["ceil_mode"])))
    return [y] + [None] * (len(node.outputs) - 1)  # the window-local indices have no ONNX form


@mapping("avg_pool2d")
def _avg_pool2d(ctx, node):
    a = node.attrs
    if a.get("divisor_override"):
        raise _unsupported(ctx, "with divisor_override has no ONNX mapping")
    ph, pw = a["padding"]
    return ctx.add("AveragePool", [ctx.input(_x(node))], kernel_shape=list(a["kernel"]), strides=list(a["stride"]),
                   pads=[ph, pw, ph, pw], ceil_mode=int(bool(a["ceil_mode"])),
                   count_include_pad=int(bool(a["count_include_pad"])))


@mapping("layer_norm")
def _layer_norm(ctx, node):
    x, w, b = node.inputs
    nd = node.attrs["ndims"]
    dt = _out(node).dtype
    norm_shape = tuple(x.shape[-nd:])
    scale = ctx.input(w, dt) if w is not None else ctx.const(np.ones(norm_shape, dt), "ln_ones")
    ins = [ctx.input(x, dt), scale] + ([ctx.input(b, dt)] if b is not None else [])
    return ctx.add("LayerNormalization", ins, n_out=3, axis=-nd, epsilon=float(node.attrs["eps"]))


@mapping("softmax", "log_softmax")
def _softmax(ctx, node):
    x, out = _x(node), _out(node)
    dim = norm_dim(node.op_name, node.attrs["dim"], len(x.shape)) if x.shape else 0
    return ctx.add("Softmax" if node.op_name == "softmax" else "LogSoftmax", [ctx.input(x, out.dtype)], axis=dim)


@mapping("index_select")
def _index_select(ctx, node):
    x, index = node.inputs
    dim = norm_dim("index_select", node.attrs["dim"], len(x.shape))
    return ctx.add("Gather", [ctx.input(x), ctx.input(index, np.int64)], axis=dim)


@mapping("gather")
def _gather(ctx, node):
    x, index = node.inputs
    dim = norm_dim("gather", node.attrs["dim"], len(x.shape))
    return ctx.add("GatherElements", [ctx.input(x), ctx.input(index, np.int64)], axis=dim)


@mapping("scatter", "scatter_add")
def _scatter(ctx, node):
    x, index, src = node.inputs
    dim = norm_dim(node.op_name, node.attrs["dim"], len(x.shape))
    dt = _out(node).dtype
    if not isinstance(src, Value):
        src = ctx.add("Expand", [ctx.input(src, dt), ctx.ints(index.shape)])
    else:
        src = ctx.input(src, dt)
    return ctx.add("ScatterElements", [ctx.input(x, dt), ctx.input(index, np.int64), src], axis=dim,
                   reduction="add" if node.op_name == "scatter_add" else None)


@mapping("one_hot")
def _one_hot(ctx, node):
    out = _out(node)
    values = ctx.const(np.array([0, 1], dtype=out.dtype), "onehot_values")
    depth = ctx.const(np.array(node.attrs["num_classes"], dtype=np.int64), "depth")
    return ctx.add("OneHot", [ctx.input(_x(node)), depth, values], axis=-1)


@mapping("topk", "sort")
def _topk(ctx, node):
    x = _x(node)
    a = node.attrs
    dim = norm_dim(node.op_name, a.get("dim", -1), len(x.shape))
    if node.op_name == "topk":
        k, largest, sort = a["k"], a.get("largest", True), a.get("sorted", True)
    else:
        k, largest, sort = x.shape[dim], a.get("descending", False), True
    values, idx = ctx.add("TopK", [ctx.input(x), ctx.ints([k], "k")], n_out=2, axis=dim, largest=int(bool(largest)),
                          sorted=int(bool(sort)))
    return [values, ctx.cast(idx, np.int64, node.outputs[1].dtype)]


@mapping("nll_loss")
def _nll_loss(ctx, node):
    logp, target, weight = node.inputs
    a = node.attrs
    ins = [ctx.input(logp), ctx.input(target, np.int64)] + ([ctx.input(weight, logp.dtype)] if weight is not None else [])
    return ctx.add("NegativeLogLikelihoodLoss", ins, reduction=a["reduction"], ignore_index=int(a["ignore_index"]))


@mapping("cross_entropy")
def _cross_entropy(ctx, node):
    """loss and log-probabilities by SoftmaxCrossEntropyLoss; the total weight (the samples not ignored) by
    counting the targets that differ from ignore_index."""
    logits, target = node.inputs
    a = node.attrs
    labels = ctx.input(target, np.int64)
    loss, logp = ctx.add("SoftmaxCrossEntropyLoss", [ctx.input(logits), labels], n_out=2,
                         reduction=a["reduction"], ignore_index=int(a["ignore_index"]))
    ignore = ctx.const(np.array(int(a["ignore_index"]), np.int64), "ignore_index")
    kept = ctx.add("Cast", [ctx.add("Not", [ctx.add("Equal", [labels, ignore])])], to=ctx.dtype_code(logits.dtype))
    return [loss, logp, ctx.add("ReduceSum", [kept], keepdims=0)]


@mapping("binary_cross_entropy")
def _binary_cross_entropy(ctx, node):
    """(t - 1) max(log(1 - p), -100) - t max(log(p), -100); ONNX checks no range, and has no log1p."""
    p, t = node.inputs
    dt = _out(node).dtype
    p, t = ctx.input(p, dt), ctx.input(t, dt)
    floor = _scalar(ctx, -100.0, dt)
    log_p = ctx.add("Max", [ctx.add("Log", [p]), floor])
    log_q = ctx.add("Max", [ctx.add("Log", [ctx.add("Sub", [_scalar(ctx, 1.0, dt), p])]), floor])
    return ctx.add("Sub", [ctx.add("Mul", [ctx.add("Sub", [t, _scalar(ctx, 1.0, dt)]), log_q]),
                           ctx.add("Mul", [t, log_p])])


@mapping("gaussian_nll_variance")
def _gaussian_nll_variance(ctx, node):
    dt = _out(node).dtype
    return ctx.add("Max", [ctx.input(_x(node), dt), _scalar(ctx, node.attrs["eps"], dt)])


# --- indexing ----------------------------------------------------------------------------
@mapping("getitem")
def _getitem(ctx, node):
    from ember.onnx.getitem import getitem

    return getitem(ctx, node)


# --- fused layers ---------------------------------------------------------------------------
@mapping("lstm_cell")
def _lstm_cell(ctx, node):
    """One LSTM step from gate pre-activations [i, f, g, o] and the cell state: (h, c')."""
    pre, c = node.inputs
    dt = _out(node).dtype
    hidden = c.shape[-1]
    if not isinstance(hidden, int):
        raise _unsupported(ctx, "has a symbolic hidden size")
    i, f, g, o = ctx.add("Split", [ctx.input(pre, dt), ctx.ints([hidden] * 4, "split")], n_out=4, axis=-1)
    i, f, o = (ctx.add("Sigmoid", [t]) for t in (i, f, o))
    c_new = ctx.add("Add", [ctx.add("Mul", [f, ctx.input(c, dt)]), ctx.add("Mul", [i, ctx.add("Tanh", [g])])])
    return [ctx.add("Mul", [o, ctx.add("Tanh", [c_new])]), c_new]


@mapping("lstm_layer")
def _lstm_layer(ctx, node):
    """A whole LSTM layer as ONNX's LSTM op: X is the input projections (T, N, 4H), so W is the permutation
    from Ember's (PyTorch's) gate order [i, f, g, o] to ONNX's [i, o, f, c]; R is w_hh's rows in that order."""
    xw, h0, c0, w_hh = node.inputs
    dt = _out(node).dtype
    hidden = h0.shape[-1]
    if not isinstance(hidden, int):
        raise _unsupported(ctx, "has a symbolic hidden size")
    order = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in (0, 3, 1, 2)])  # ONNX row -> ours
    w = np.zeros((1, 4 * hidden, 4 * hidden), dtype=dt)
    w[0, np.arange(4 * hidden), order] = 1
    r = ctx.add("Unsqueeze", [ctx.add("Gather", [ctx.input(w_hh, dt), ctx.const(order, "gate_order")], axis=0),
                              ctx.ints([0], "axes")])
    h = ctx.add("Unsqueeze", [ctx.input(h0, dt), ctx.ints([0], "axes")])
    c = ctx.add("Unsqueeze", [ctx.input(c0, dt), ctx.ints([0], "axes")])
    y, y_h, y_c = ctx.add("LSTM", [ctx.input(xw, dt), ctx.const(w, "gate_permutation"), r, "", "", h, c], n_out=3,
                          hidden_size=hidden)
    # outputs (hs, c_T, the gradient's three, h_T)
    return [ctx.add("Squeeze", [y, ctx.ints([1], "axes")]), ctx.add("Squeeze", [y_c, ctx.ints([0], "axes")]),
            None, None, None, ctx.add("Squeeze", [y_h, ctx.ints([0], "axes")])]


@mapping("gru_layer")
def _gru_layer(ctx, node):
    """A whole GRU layer as ONNX's GRU op with linear_before_reset=1 (PyTorch's n = tanh(x_n + r * (W_hn h + b_hn))):
    X is the input projections (T, N, 3H), so W is the permutation from Ember's (PyTorch's) gate order [r, z, n]
    to ONNX's [z, r, h]; R is w_hh's rows and B's recurrent half b_hh's entries in that order."""
    xw, h0, w_hh, b_hh = node.inputs
    dt = _out(node).dtype
    hidden = h0.shape[-1]
    if not isinstance(hidden, int):
        raise _unsupported(ctx, "has a symbolic hidden size")
    order = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in (1, 0, 2)])  # ONNX row -> ours
    w = np.zeros((1, 3 * hidden, 3 * hidden), dtype=dt)
    w[0, np.arange(3 * hidden), order] = 1
    gate_order = ctx.const(order, "gate_order")
    r = ctx.add("Unsqueeze", [ctx.add("Gather", [ctx.input(w_hh, dt), gate_order], axis=0), ctx.ints([0], "axes")])
    b = ""
    if b_hh is not None:
        rb = ctx.add("Gather", [ctx.input(b_hh, dt), gate_order], axis=0)
        b = ctx.add("Unsqueeze", [ctx.add("Concat", [ctx.const(np.zeros(3 * hidden, dt), "zero_bias"), rb], axis=0),
                                  ctx.ints([0], "axes")])
    h = ctx.add("Unsqueeze", [ctx.input(h0, dt), ctx.ints([0], "axes")])
    y, y_h = ctx.add("GRU", [ctx.input(xw, dt), ctx.const(w, "gate_permutation"), r, b, "", h], n_out=2,
                     hidden_size=hidden, linear_before_reset=1)
    # outputs (hs, the gradient's two, h_T)
    return [ctx.add("Squeeze", [y, ctx.ints([1], "axes")]), None, None, ctx.add("Squeeze", [y_h, ctx.ints([0], "axes")])]


@mapping("scaled_dot_product_attention")
def _attention(ctx, node):
    """softmax(Q K^T * scale + mask) V with MatMul, Softmax and a mask (opset 18 has no Attention op)."""
    q, k, v, mask = node.inputs
    dt = _out(node).dtype
    rank = len(q.shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = ctx.add("MatMul", [ctx.add("Mul", [ctx.input(q, dt), _scalar(ctx, node.attrs["scale"], dt)]),
                                ctx.add("Transpose", [ctx.input(k, dt)], perm=perm)])
    if node.attrs["causal"]:
        L, S = q.shape[-2], k.shape[-2]
        if not (isinstance(L, int) and isinstance(S, int)):
            raise _unsupported(ctx, "is causal over a symbolic sequence length")
        blocked = np.where(np.triu(np.ones((L, S), dtype=bool), 1), -np.inf, 0.0).astype(dt)
        scores = ctx.add("Add", [scores, ctx.const(blocked, "causal_mask")])
    if mask is not None:
        if mask.dtype == np.bool_:
            scores = ctx.add("Where", [ctx.input(mask), scores, _scalar(ctx, -np.inf, dt)])
        else:
            scores = ctx.add("Add", [scores, ctx.input(mask, dt)])
    weights = ctx.add("Softmax", [scores], axis=-1)
    if mask is not None:  # a query whose keys are all masked gets weights 0 (Softmax alone gives NaN), as in Ember
        nowhere = ctx.add("Equal", [_reduce(ctx, "ReduceMax", scores, [-1], keepdims=True), _scalar(ctx, -np.inf, dt)])
        weights = ctx.add("Where", [nowhere, _scalar(ctx, 0.0, dt), weights])
    return [ctx.add("MatMul", [weights, ctx.input(v, dt)]), weights]


@mapping("gru_cell")
def _gru_cell(ctx, node):
    """One GRU step: h' = n + z * (h - n) with r, z = sigmoid(x_rz + gh_rz) and n = tanh(x_n + r * gh_n)."""
    x_rz, x_n, gh, h = node.inputs
    dt = _out(node).dtype
    hidden = h.shape[-1]
    if not isinstance(hidden, int):
        raise _unsupported(ctx, "has a symbolic hidden size")
    gh_rz, gh_n = ctx.add("Split", [ctx.input(gh, dt), ctx.ints([2 * hidden, hidden], "split")], n_out=2, axis=-1)
    rz = ctx.add("Sigmoid", [ctx.add("Add", [ctx.input(x_rz, dt), gh_rz])])
    r, z = ctx.add("Split", [rz, ctx.ints([hidden, hidden], "split")], n_out=2, axis=-1)
    n = ctx.add("Tanh", [ctx.add("Add", [ctx.input(x_n, dt), ctx.add("Mul", [r, gh_n])])])
    return ctx.add("Add", [n, ctx.add("Mul", [z, ctx.add("Sub", [ctx.input(h, dt), n])])])
