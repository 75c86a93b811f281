"""Where values enter a TF1 graph: placeholders, constants, filled tensors and random draws."""

from __future__ import annotations

import math

import numpy as np

from ember import dtypes as dt
from ember import ops as _ops
from ember.dispatch import apply
from ember.op import Op, register
from ember.ops import random_ops
from ember.ops._rules import spec
from ember.tensor import Tensor
from ember.v1.convert import constant_tensor, convert_to_tensor, host_array, is_symbolic, np_dtype
from ember.v1.graph_api import get_default_graph
from ember.v1.graph_tensor import GraphTensor
from ember.v1.naming import tf_op
from ember.v1.tensor_shape import Dimension, TensorShape


def static_shape(shape, what: str) -> tuple:
    """A shape given as a list/tuple of ints or Dimensions (None or -1: unknown), or a TensorShape, as a tuple."""
    if isinstance(shape, Tensor):
        raise NotImplementedError(f"{what}: shapes given as tensors (dynamic shapes) are not supported; pass a list")
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer, Dimension)):
        shape = [shape]
    dims = []
    for d in shape:
        if isinstance(d, Dimension):
            d = d.value
        if d is None or (isinstance(d, (int, np.integer)) and d == -1):
            dims.append(None)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            dims.append(int(d))
        else:
            raise TypeError(f"{what}: dimensions must be non-negative ints or None, got {tuple(shape)}")
    return tuple(dims)


def placeholder(dtype, shape=None, name: str | None = None) -> Tensor:
    """A tensor fed at run time; None dimensions (or shape=None: unknown rank) accept any size."""
    graph = get_default_graph()
    device = graph.device
    dims = None if shape is None else static_shape(shape, "placeholder")
    value = graph.placeholder(dims, np_dtype(dtype), device, name=graph.scoped_name(name or "Placeholder"))
    t = GraphTensor._make(value, device)
    if t.is_floating_point():
        t.requires_grad_(True)  # so every op on it is recorded and gradients() can reach it
    return t


class PlaceholderWithDefaultOp(Op):
    """Its input, unless a value is fed for it; its static shape is the (maybe less specific) declared one."""

    name = "placeholder_with_default"
    differentiable = False

    def infer(self, x, shape):
        if len(shape) != len(x.shape) or any(d is not None and d != s for d, s in zip(shape, x.shape)):
            raise ValueError(f"placeholder_with_default: the default of shape {tuple(x.shape)} does not fit the "
                             f"shape {tuple(shape)}")
        return spec(shape, x.dtype)

    def kernel(self, xp, x, shape):
        return x


placeholder_with_default_op = register(PlaceholderWithDefaultOp())


@tf_op("PlaceholderWithDefault")
def placeholder_with_default(input, shape, name: str | None = None) -> Tensor:
    """A tensor that is `input` unless a value is fed for it (then checked against `shape`)."""
    x = convert_to_tensor(input)
    return apply(placeholder_with_default_op, x, shape=static_shape(shape, "placeholder_with_default"))


@tf_op("Const")
def constant(value, dtype=None, shape=None, name: str = "Const", verify_shape: bool = False) -> Tensor:
    """A constant tensor; with `shape`, the values fill it in order and the last one repeats (TF1's rule)."""
    arr = host_array(value, dtype)
    if shape is not None:
        arr = fill_shape(arr, static_shape(shape, "constant"), verify_shape)
    return constant_tensor(arr)


def fill_shape(arr: np.ndarray, dims: tuple, verify_shape: bool = False) -> np.ndarray:
    """`arr`'s values laid out in shape `dims` as TF1's tf.constant lays them: in order, the last value repeated
    to fill the rest (zeros when there are no values); more values than the shape holds is a ValueError."""
    if None in dims:
        raise TypeError(f"constant: shape {list(dims)} must be fully known (TF converts each dimension with int())")
    if verify_shape and arr.shape != dims:
        raise TypeError(f"Expected Tensor's shape: {dims}, got {arr.shape}.")
    size = math.prod(dims)
    if size == 0:  # TF makes an empty tensor of the shape, whatever the value
        return np.zeros(dims, dtype=arr.dtype)
    if arr.size > size:
        raise ValueError(f"Too many elements provided. Needed at most {size}, but received {arr.size}")
    if arr.size == size:
        return arr.reshape(dims)
    if arr.size == 0:
        return np.zeros(dims, dtype=arr.dtype)
    flat = arr.reshape(-1)
    return np.concatenate([flat, np.full(size - flat.size, flat[-1], dtype=arr.dtype)]).reshape(dims)


@tf_op("Fill")
def fill(dims, value, name: str | None = None) -> Tensor:
    """A tensor of shape `dims` filled with the scalar `value` (its dtype follows the value)."""
    arr = host_array(value)
    if arr.ndim != 0:
        raise ValueError(f"Fill: value must be a scalar (rank 0), got one of shape {list(arr.shape)}")
    return constant(arr, dtype=dt.from_numpy_dtype(arr.dtype), shape=dims)


@tf_op("zeros")
def zeros(shape, dtype=dt.float32, name: str | None = None) -> Tensor:
    """A tensor of zeros."""
    return constant(0, dtype=dtype, shape=shape)


@tf_op("ones")
def ones(shape, dtype=dt.float32, name: str | None = None) -> Tensor:
    """A tensor of ones."""
    return constant(1, dtype=dtype, shape=shape)


@tf_op("zeros_like")
def zeros_like(tensor, dtype=None, name: str | None = None) -> Tensor:
    """Zeros with the shape (known at run time) and dtype of `tensor`."""
    return _ops.zeros_like(convert_to_tensor(tensor), dtype=dtype)


@tf_op("ones_like")
def ones_like(tensor, dtype=None, name: str | None = None) -> Tensor:
    """Ones with the shape (known at run time) and dtype of `tensor`."""
    return _ops.ones_like(convert_to_tensor(tensor), dtype=dtype)


@tf_op("range")
def range(start, limit=None, delta=1, dtype=None, name: str = "range") -> Tensor:
    """Numbers from start up to (not including) limit by delta (int32 for ints, float32 for floats)."""
    if limit is None:
        start, limit = 0, start
    return constant(np.arange(start, limit, delta).tolist(), dtype=dtype)


@tf_op("LinSpace")
def linspace(start, stop, num: int, name: str = "linspace") -> Tensor:
    """`num` evenly spaced float32 values from start to stop inclusive."""
    return constant(np.linspace(start, stop, num, dtype=np.float32))


# --- random ------------------------------------------------------------------------------------
def random_tensor(op, shape, dtype, seed=None, like: Tensor | None = None, **params) -> Tensor:
    """A node of a random op: new numbers at every run; `like` supplies unknown dims at run time."""
    graph = like._data.graph if like is not None else get_default_graph()
    device = like._device if like is not None else graph.device
    dims = static_shape(shape, op.name)
    if None in dims and like is None:
        raise ValueError(f"{op.name}: shape {tuple(shape)} must be fully known")
    op_seed = graph.next_seed(seed) if hasattr(graph, "next_seed") else seed
    attrs = dict(shape=dims, dtype=np_dtype(dtype), seed=None if op_seed is None else random_ops.SeedStream(op_seed),
                 **params)
    value = graph.add_op(op, [like._data] if like is not None else [], attrs, device)
    return GraphTensor._make(value, device)


def _scaled(t: Tensor, scale, shift) -> Tensor:
    """t * scale + shift for tensor-valued distribution parameters."""
    return t * convert_to_tensor(scale, dtype=t.dtype) + convert_to_tensor(shift, dtype=t.dtype)


@tf_op("random_normal")
def random_normal(shape, mean=0.0, stddev=1.0, dtype=dt.float32, seed=None, name: str | None = None) -> Tensor:
    """Normal samples, drawn afresh at every run."""
    if is_symbolic(mean) or is_symbolic(stddev):
        return _scaled(random_normal(shape, 0.0, 1.0, dtype, seed), stddev, mean)
    return random_tensor(random_ops.random_normal_op, shape, dtype, seed, mean=float(mean), std=float(stddev))


@tf_op("truncated_normal")
def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dt.float32, seed=None, name: str | None = None) -> Tensor:
    """Normal samples redrawn until within two standard deviations, drawn afresh at every run."""
    if is_symbolic(mean) or is_symbolic(stddev):
        return _scaled(truncated_normal(shape, 0.0, 1.0, dtype, seed), stddev, mean)
    return random_tensor(random_ops.truncated_normal_op, shape, dtype, seed, mean=float(mean),
                         std=float(stddev))


@tf_op("random_uniform")
def random_uniform(shape, minval=0, maxval=None, dtype=dt.float32, seed=None, name: str | None = None) -> Tensor:
    """Uniform samples in [minval, maxval) (maxval defaults to 1 for floats; required for ints)."""
    np_dt = np_dtype(dtype)
    if np_dt.kind in "iu":
        if maxval is None:
            raise ValueError("random_uniform: maxval must be given for integer dtypes")
        return random_tensor(random_ops.random_integers_op, shape, dtype, seed, low=int(minval),
                             high=int(maxval))
    maxval = 1.0 if maxval is None else maxval
    if is_symbolic(minval) or is_symbolic(maxval):
        lo = convert_to_tensor(minval, dtype=dtype)
        return _scaled(random_uniform(shape, 0.0, 1.0, dtype, seed), convert_to_tensor(maxval, dtype) - lo, lo)
    return random_tensor(random_ops.random_uniform_op, shape, dtype, seed, low=float(minval),
                         high=float(maxval))
