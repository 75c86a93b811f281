"""TF1's math ops by their TF names and arguments: arithmetic, elementwise functions, reductions, matmul."""

from __future__ import annotations

import math

from ember import dtypes as dt
from ember import ops
from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import norm_dims, spec
from ember.tensor import Tensor
from ember.v1.convert import convert_to_tensor, np_dtype, operands
from ember.v1.naming import tf_op
from ember.v1.state_ops import stop_gradient_op
from ember.v1.tf_grad_ops import tf_maximum_op, tf_minimum_op

# --- arithmetic and comparisons --------------------------------------------------------------------


def _binary(name: str, tf_name: str, fn, doc: str):
    """A TF-style binary op: operands converted (plain data takes the tensor's dtype), then `fn`."""

    def op(x, y, name: str | None = None) -> Tensor:
        a, b = operands(x, y)
        return fn(a, b)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return tf_op(tf_name)(op)


add = _binary("add", "Add", ops.add, "x + y, elementwise with broadcasting.")
subtract = _binary("subtract", "Sub", ops.sub, "x - y, elementwise with broadcasting.")
multiply = _binary("multiply", "Mul", ops.mul, "x * y, elementwise with broadcasting.")
maximum = _binary("maximum", "Maximum", lambda a, b: apply(tf_maximum_op, a, b),
                  "The larger of x and y, elementwise; a tie's gradient goes to x, as in TF.")
minimum = _binary("minimum", "Minimum", lambda a, b: apply(tf_minimum_op, a, b),
                  "The smaller of x and y, elementwise; a tie's gradient goes to x, as in TF.")
equal = _binary("equal", "Equal", ops.eq, "x == y, elementwise (bool).")
not_equal = _binary("not_equal", "NotEqual", ops.ne, "x != y, elementwise (bool).")
less = _binary("less", "Less", ops.lt, "x < y, elementwise (bool).")
less_equal = _binary("less_equal", "LessEqual", ops.le, "x <= y, elementwise (bool).")
greater = _binary("greater", "Greater", ops.gt, "x > y, elementwise (bool).")
greater_equal = _binary("greater_equal", "GreaterEqual", ops.ge, "x >= y, elementwise (bool).")
logical_and = _binary("logical_and", "LogicalAnd", ops.logical_and, "x and y, elementwise.")
logical_or = _binary("logical_or", "LogicalOr", ops.logical_or, "x or y, elementwise.")
squared_difference = _binary("squared_difference", "SquaredDifference", lambda a, b: ops.square(a - b),
                             "(x - y) ** 2, elementwise.")
pow = _binary("pow", "Pow", ops.pow, "x ** y, elementwise.")
mod = _binary("mod", "FloorMod", ops.remainder, "x mod y with the sign of y, elementwise.")
floordiv = _binary("floordiv", "floordiv", ops.floor_divide, "x // y, elementwise.")
mul, sub = multiply, subtract


@tf_op("truediv")
def divide(x, y, name: str | None = None) -> Tensor:
    """x / y, elementwise (a float result)."""
    a, b = operands(x, y)
    return ops.div(a, b)


truediv = divide


@tf_op("div")
def div(x, y, name: str | None = None) -> Tensor:
    """TF1's div: floor division for integers, true division for floats."""
    a, b = operands(x, y)
    ints = [t for t in (a, b) if isinstance(t, Tensor)]
    if ints and all(t.dtype.category == dt.INT for t in ints):
        return ops.floor_divide(a, b)
    return ops.div(a, b)


@tf_op("AddN")
def add_n(inputs, name: str | None = None) -> Tensor:
    """The elementwise sum of a list of tensors of one shape."""
    tensors = [convert_to_tensor(t) for t in inputs]
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t
    return out


# --- elementwise functions ------------------------------------------------------------------------
def _unary(fn, tf_name: str, doc: str):
    """A TF-style elementwise function: the input converted to a tensor, then `fn`."""

    def op(x, name: str | None = None) -> Tensor:
        return fn(convert_to_tensor(x))

    op.__name__ = op.__qualname__ = fn.__name__
    op.__doc__ = doc
    return tf_op(tf_name)(op)


exp = _unary(ops.exp, "Exp", "e ** x, elementwise.")
log = _unary(ops.log, "Log", "Natural logarithm, elementwise.")
log1p = _unary(ops.log1p, "Log1p", "log(1 + x), elementwise.")
sqrt = _unary(ops.sqrt, "Sqrt", "Square root, elementwise.")
rsqrt = _unary(ops.rsqrt, "Rsqrt", "1 / sqrt(x), elementwise.")
square = _unary(ops.square, "Square", "x * x, elementwise.")
tanh = _unary(ops.tanh, "Tanh", "Hyperbolic tangent, elementwise.")
sigmoid = _unary(ops.sigmoid, "Sigmoid", "1 / (1 + exp(-x)), elementwise.")
abs = _unary(ops.abs, "Abs", "|x|, elementwise.")
negative = _unary(ops.neg, "Neg", "-x, elementwise.")
neg = negative
sign = _unary(ops.sign, "Sign", "The sign of x (-1, 0 or 1), elementwise.")
def _no_gradient(fn):
    """fn whose result has no gradient at all (tf.gradients gives None through it), as TF's floor/ceil/round."""

    def op(x):
        return apply(stop_gradient_op, fn(x))

    op.__name__ = fn.__name__
    return op


floor = _unary(_no_gradient(ops.floor), "Floor", "Largest integer not above x, elementwise (no gradient).")
ceil = _unary(_no_gradient(ops.ceil), "Ceil", "Smallest integer not below x, elementwise (no gradient).")
round = _unary(_no_gradient(ops.round), "Round", "x rounded to the nearest integer (half to even), elementwise "
                                                 "(no gradient).")
sin = _unary(ops.sin, "Sin", "Sine, elementwise.")
cos = _unary(ops.cos, "Cos", "Cosine, elementwise.")
reciprocal = _unary(ops.reciprocal, "Reciprocal", "1 / x, elementwise.")
logical_not = _unary(ops.logical_not, "LogicalNot", "not x, elementwise.")
is_nan = _unary(ops.isnan, "IsNan", "Whether x is NaN, elementwise.")
is_finite = _unary(ops.isfinite, "IsFinite", "Whether x is finite, elementwise.")


@tf_op("clip_by_value")
def clip_by_value(t, clip_value_min, clip_value_max, name: str | None = None) -> Tensor:
    """t with values below the min raised to it and above the max lowered to it."""
    t = convert_to_tensor(t)
    lo, hi = clip_value_min, clip_value_max
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        return ops.minimum(ops.maximum(t, convert_to_tensor(lo, dtype=t.dtype)), convert_to_tensor(hi, dtype=t.dtype))
    return ops.clamp(t, lo, hi)


@tf_op("Cast")
def cast(x, dtype, name: str | None = None) -> Tensor:
    """x converted to dtype (floats to ints truncate toward zero)."""
    x = convert_to_tensor(x)
    return x.to(dt.as_dtype(dtype))


@tf_op("ToFloat")
def to_float(x, name: str | None = None) -> Tensor:
    """x cast to float32."""
    return cast(x, dt.float32)


@tf_op("ToInt32")
def to_int32(x, name: str | None = None) -> Tensor:
    """x cast to int32."""
    return cast(x, dt.int32)


@tf_op("ToInt64")
def to_int64(x, name: str | None = None) -> Tensor:
    """x cast to int64."""
    return cast(x, dt.int64)


# --- matrix products --------------------------------------------------------------------------------
@tf_op("MatMul")
def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: str | None = None) -> Tensor:
    """The matrix product a @ b (batched over leading dims), optionally transposing either side."""
    a, b = operands(a, b)
    if transpose_a or adjoint_a:
        a = ops.transpose(a, -2, -1)
    if transpose_b or adjoint_b:
        b = ops.transpose(b, -2, -1)
    return ops.matmul(a, b)


# --- reductions --------------------------------------------------------------------------------------
class ElementCountOp(Op):
    """The number of elements over some dims, taken from the input's shape when the graph runs."""

    name = "element_count"
    differentiable = False
    fresh_output = True

    def infer(self, x, dims, dtype):
        return spec((), dtype)

    def kernel(self, xp, x, dims, dtype):
        sizes = x.shape if dims is None else [x.shape[d] for d in (dims if isinstance(dims, tuple) else (dims,))]
        return xp.asarray(math.prod(sizes), dtype=dtype)


element_count_op = register(ElementCountOp())


def _axes(axis, reduction_indices):
    axis = reduction_indices if axis is None else axis
    if axis is None:
        return None
    if isinstance(axis, Tensor):
        raise NotImplementedError("reduction axes given as tensors are not supported; pass ints")
    return tuple(int(a) for a in axis) if isinstance(axis, (list, tuple)) else int(axis)


def _keep(keepdims, keep_dims) -> bool:
    return bool(keep_dims if keepdims is None and keep_dims is not None else keepdims or False)


def _reduce(fn, input_tensor, axis, keepdims, name, reduction_indices, keep_dims) -> Tensor:
    x = convert_to_tensor(input_tensor)
    dims = _axes(axis, reduction_indices)
    if dims == ():
        return x
    return fn(x, dims, _keep(keepdims, keep_dims))


@tf_op("Sum")
def reduce_sum(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
               keep_dims=None) -> Tensor:
    """Sum over `axis` (all axes when None); bools and ints sum in their own integer type."""

    def fn(x, dims, keep):
        out = ops.sum(x, dim=dims, keepdim=keep)
        return out.to(x.dtype) if x.dtype.category == dt.INT and out.dtype is not x.dtype else out

    x = convert_to_tensor(input_tensor)
    if x.dtype is dt.bool_:
        x = x.to(dt.int32)
    return _reduce(fn, x, axis, keepdims, name, reduction_indices, keep_dims)


@tf_op("Mean")
def reduce_mean(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
                keep_dims=None) -> Tensor:
    """Mean over `axis` (all axes when None); integer inputs give an integer (truncated) mean, as TF."""

    def fn(x, dims, keep):
        if x.dtype.category != dt.FLOAT:
            total = ops.sum(x, dim=dims, keepdim=keep)
            return ops.div(total, _count(x, dims, total.dtype), rounding_mode="trunc").to(x.dtype)
        reduced = norm_dims("reduce_mean", dims, x.ndim)
        if any(x.shape[d] is None for d in reduced):
            # The count is only known at run time, and Ember's mean needs it when gradients are built.
            return ops.sum(x, dim=dims, keepdim=keep) / _count(x, reduced, x.dtype)
        return ops.mean(x, dim=dims, keepdim=keep)

    return _reduce(fn, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def _count(x: Tensor, dims, dtype) -> Tensor:
    """The number of elements of `x` over `dims` (None: all of them), counted when the graph runs."""
    return apply(element_count_op, x, dims=dims, dtype=np_dtype(dtype))


@tf_op("Max")
def reduce_max(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
               keep_dims=None) -> Tensor:
    """Maximum over `axis`; the gradient is shared among ties."""
    return _reduce(lambda x, d, k: ops.amax(x, dim=d, keepdim=k), input_tensor, axis, keepdims, name,
                   reduction_indices, keep_dims)


@tf_op("Min")
def reduce_min(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
               keep_dims=None) -> Tensor:
    """Minimum over `axis`; the gradient is shared among ties."""
    return _reduce(lambda x, d, k: ops.amin(x, dim=d, keepdim=k), input_tensor, axis, keepdims, name,
                   reduction_indices, keep_dims)


@tf_op("Prod")
def reduce_prod(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
                keep_dims=None) -> Tensor:
    """Product over `axis`."""

    def fn(x, dims, keep):
        out = ops.prod(x, dim=dims, keepdim=keep)
        return out.to(x.dtype) if out.dtype is not x.dtype else out

    return _reduce(fn, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


@tf_op("All")
def reduce_all(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
               keep_dims=None) -> Tensor:
    """Logical and over `axis`."""
    return _reduce(lambda x, d, k: ops.all(x, dim=d, keepdim=k), input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


@tf_op("Any")
def reduce_any(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
               keep_dims=None) -> Tensor:
    """Logical or over `axis`."""
    return _reduce(lambda x, d, k: ops.any(x, dim=d, keepdim=k), input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


@tf_op("ReduceLogSumExp")
def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name: str | None = None, reduction_indices=None,
                     keep_dims=None) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed stably."""

    def fn(x, dims, keep):
        return ops.logsumexp(x, dim=dims, keepdim=keep)  # dims as given: None (all) holds for an unknown rank too

    return _reduce(fn, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def _arg(fn, input, axis, name, dimension, output_type) -> Tensor:
    x = convert_to_tensor(input)
    axis = dimension if axis is None else axis
    out = fn(x, dim=0 if axis is None else int(axis))  # TF1's default axis is 0
    return out if output_type is None else out.to(dt.as_dtype(output_type))


@tf_op("ArgMax")
def argmax(input, axis=None, name: str | None = None, dimension=None, output_type=dt.int64) -> Tensor:
    """Index of the largest value along `axis` (default 0, as TF1)."""
    return _arg(ops.argmax, input, axis, name, dimension, output_type)


@tf_op("ArgMin")
def argmin(input, axis=None, name: str | None = None, dimension=None, output_type=dt.int64) -> Tensor:
    """Index of the smallest value along `axis` (default 0, as TF1)."""
    return _arg(ops.argmin, input, axis, name, dimension, output_type)
