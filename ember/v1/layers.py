"""`tf.layers`: TF1's functional layers (dense, conv2d, pooling, dropout, flatten) on get_variable.

Each layer opens a variable scope named `name` (default: "dense", "conv2d", ... made unique), makes
its variables there with get_variable ("dense/kernel", "dense/bias"), and builds its ops in the
name scope of the same name, so `reuse=True` (or an enclosing reusing scope) shares them.
"""

from __future__ import annotations

import math

from ember.tensor import Tensor
from ember.v1 import nn
from ember.v1.array_ops import reshape
from ember.v1.control_flow_ops import cond
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.graph_api import GraphKeys, get_default_graph
from ember.v1.init_ops import Zeros
from ember.v1.math_ops import matmul
from ember.v1.state_ops import identity
from ember.v1.variable_scope import get_variable, variable_scope

__all__ = ["average_pooling2d", "conv2d", "dense", "dropout", "flatten", "max_pooling2d"]


def _pair(v, what: str) -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v}")
    return v


def _data_format(data_format: str) -> str:
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    return "NHWC" if data_format == "channels_last" else "NCHW"


def _regularize(var, regularizer) -> None:
    if regularizer is not None:
        loss = regularizer(var)
        if loss is not None:
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)


def _activate(x: Tensor, activation, activity_regularizer) -> Tensor:
    if activation is not None:
        x = activation(x)
    if activity_regularizer is not None:
        _regularize(x, activity_regularizer)
    return x


def dense(inputs, units: int, activation=None, use_bias: bool = True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
          kernel_constraint=None, bias_constraint=None, trainable: bool = True, name: str | None = None,
          reuse=None) -> Tensor:
    """activation(inputs @ kernel + bias) over the last axis, kernel of shape [in, units]."""
    x = convert_to_tensor(inputs)
    fan_in = x.shape[-1] if x.ndim else None
    if fan_in is None:
        raise ValueError("The last dimension of the inputs to `Dense` should be defined. Found `None`.")
    with variable_scope(name, default_name="dense", reuse=reuse):
        kernel = get_variable("kernel", [fan_in, int(units)], dtype=x.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable)
        if x.ndim == 2:
            out = matmul(x, kernel)
        else:  # apply to every position of the leading axes
            flat = reshape(x, [-1, fan_in])
            out = reshape(matmul(flat, kernel), [-1 if d is None else d for d in x.shape[:-1]] + [int(units)])
        if use_bias:
            bias = get_variable("bias", [int(units)], dtype=x.dtype,
                                initializer=bias_initializer if bias_initializer is not None else Zeros(),
                                regularizer=bias_regularizer, trainable=trainable)
            out = nn.bias_add(out, bias)
        return _activate(out, activation, activity_regularizer)


def conv2d(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=(1, 1), activation=None, use_bias: bool = True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: str | None = None, reuse=None) -> Tensor:
    """2-D convolution with a [kh, kw, in, filters] kernel, 'valid' or 'same' padding, then bias and activation."""
    x = convert_to_tensor(inputs)
    fmt = _data_format(data_format)
    channels = x.shape[-1] if fmt == "NHWC" else x.shape[1]
    if channels is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    kh, kw = _pair(kernel_size, "kernel_size")
    with variable_scope(name, default_name="conv2d", reuse=reuse):
        kernel = get_variable("kernel", [kh, kw, channels, int(filters)], dtype=x.dtype,
                              initializer=kernel_initializer, regularizer=kernel_regularizer, trainable=trainable)
        out = nn.conv2d(x, kernel, strides=_pair(strides, "strides"), padding=padding.upper(), data_format=fmt,
                        dilations=_pair(dilation_rate, "dilation_rate"))
        if use_bias:
            bias = get_variable("bias", [int(filters)], dtype=x.dtype,
                                initializer=bias_initializer if bias_initializer is not None else Zeros(),
                                regularizer=bias_regularizer, trainable=trainable)
            out = nn.bias_add(out, bias, data_format=fmt)
        return _activate(out, activation, activity_regularizer)


def _pool(fn, default: str, inputs, pool_size, strides, padding, data_format, name) -> Tensor:
    fmt = _data_format(data_format)
    k, s = _pair(pool_size, "pool_size"), _pair(strides, "strides")
    with get_default_graph().name_scope(name or default):
        return fn(convert_to_tensor(inputs), k, s, padding.upper(), data_format=fmt)


def max_pooling2d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last",
                  name: str | None = None) -> Tensor:
    """The maximum over each pool_size window, moved by strides."""
    return _pool(nn.max_pool, "max_pooling2d", inputs, pool_size, strides, padding, data_format, name)


def average_pooling2d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last",
                      name: str | None = None) -> Tensor:
    """The mean over each pool_size window, moved by strides."""
    return _pool(nn.avg_pool, "average_pooling2d", inputs, pool_size, strides, padding, data_format, name)


def dropout(inputs, rate: float = 0.5, noise_shape=None, seed=None, training=False, name: str | None = None) -> Tensor:
    """Dropout with drop probability `rate` when `training` (a Python bool or a bool tensor), else the inputs.

    As in TF1, `training` defaults to False: pass training=True (or a placeholder) to drop.
    """
    x = convert_to_tensor(inputs)
    graph = get_default_graph()
    with graph.name_scope(name or "dropout"):
        if isinstance(training, Tensor) and is_symbolic(training):
            return cond(training, lambda: nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed),
                        lambda: identity(x))
        if not training:
            return x
        return nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)


def flatten(inputs, name: str | None = None, data_format: str = "channels_last") -> Tensor:
    """The inputs as [batch, -1], keeping the batch axis."""
    x = convert_to_tensor(inputs)
    rest = x.shape[1:]
    if any(d is None for d in rest):
        raise ValueError(f"flatten: the non-batch dimensions must be known, got shape {tuple(x.shape)}")
    graph = get_default_graph()
    with graph.name_scope(name or "flatten"):
        return reshape(x, [-1, math.prod(rest)])
