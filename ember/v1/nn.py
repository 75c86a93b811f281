"""`tf.nn`: activations, softmax losses, NHWC convolution and pooling with TF's padding rule, dropout."""

from __future__ import annotations

import math

import numpy as np

from ember import ops
from ember.dispatch import apply
from ember.ops import random_ops
from ember.tensor import Tensor
from ember.v1.array_ops import gather, one_hot, squeeze
from ember.v1.check_ops import check_indices
from ember.v1.constant_ops import constant, random_tensor
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.math_ops import reduce_mean, reduce_sum, rsqrt, sigmoid, squared_difference, tanh
from ember.v1.naming import tf_op
from ember.v1.state_ops import stop_gradient
from ember.v1.tf_grad_ops import tf_relu6_op

__all__ = [
    "avg_pool", "batch_normalization", "bias_add", "conv2d", "dropout", "elu", "moments", "embedding_lookup", "l2_loss", "leaky_relu", "log_softmax",
    "max_pool", "relu", "relu6", "sigmoid", "sigmoid_cross_entropy_with_logits", "softmax",
    "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2", "softplus", "softsign",
    "sparse_softmax_cross_entropy_with_logits", "tanh",
]


# --- activations ---------------------------------------------------------------------------------
@tf_op("Relu")
def relu(features, name: str | None = None) -> Tensor:
    """max(features, 0)."""
    return ops.relu(convert_to_tensor(features))


@tf_op("Relu6")
def relu6(features, name: str | None = None) -> Tensor:
    """min(max(features, 0), 6); the gradient passes only where 0 < x < 6, as in TF."""
    return apply(tf_relu6_op, convert_to_tensor(features))


@tf_op("Elu")
def elu(features, name: str | None = None) -> Tensor:
    """x for x > 0, exp(x) - 1 otherwise."""
    return ops.elu(convert_to_tensor(features))


@tf_op("LeakyRelu")
def leaky_relu(features, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """x for x > 0, alpha * x otherwise."""
    return ops.leaky_relu(convert_to_tensor(features), alpha)


@tf_op("Softplus")
def softplus(features, name: str | None = None) -> Tensor:
    """log(exp(x) + 1)."""
    return ops.softplus(convert_to_tensor(features))


@tf_op("Softsign")
def softsign(features, name: str | None = None) -> Tensor:
    """x / (|x| + 1)."""
    x = convert_to_tensor(features)
    return x / (ops.abs(x) + 1)


def _axis(axis, dim) -> int:
    axis = dim if axis is None else axis
    return -1 if axis is None else int(axis)


@tf_op("Softmax")
def softmax(logits, axis: int | None = None, name: str | None = None, dim: int | None = None) -> Tensor:
    """exp(logits) normalised to sum to 1 along `axis` (default: the last)."""
    return ops.softmax(convert_to_tensor(logits), dim=_axis(axis, dim))


@tf_op("LogSoftmax")
def log_softmax(logits, axis: int | None = None, name: str | None = None, dim: int | None = None) -> Tensor:
    """log(softmax(logits)), computed stably."""
    return ops.log_softmax(convert_to_tensor(logits), dim=_axis(axis, dim))


# --- losses ----------------------------------------------------------------------------------------
def _labels_logits(fn: str, labels, logits, sentinel):
    if sentinel is not None or labels is None or logits is None:
        raise ValueError(f"{fn}: call it with named arguments: {fn}(labels=..., logits=...)")
    logits = convert_to_tensor(logits)
    return logits, convert_to_tensor(labels, dtype_hint=logits.dtype)


@tf_op("softmax_cross_entropy_with_logits")
def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, axis: int | None = None,
                                         name: str | None = None, dim: int | None = None) -> Tensor:
    """Cross entropy between `labels` (distributions) and softmax(logits), per example; labels get gradients."""
    logits, labels = _labels_logits("softmax_cross_entropy_with_logits_v2", labels, logits, _sentinel)
    ax = _axis(axis, dim)
    return -reduce_sum(labels * ops.log_softmax(logits, dim=ax), axis=ax)


@tf_op("softmax_cross_entropy_with_logits")
def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim: int = -1,
                                      name: str | None = None, axis: int | None = None) -> Tensor:
    """Cross entropy between `labels` and softmax(logits), per example; no gradient flows into labels (TF1)."""
    logits, labels = _labels_logits("softmax_cross_entropy_with_logits", labels, logits, _sentinel)
    return softmax_cross_entropy_with_logits_v2(labels=stop_gradient(labels), logits=logits, axis=axis, dim=dim)


@tf_op("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name: str | None = None) -> Tensor:
    """Cross entropy of integer class `labels` under softmax(logits), per example."""
    if _sentinel is not None or labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: use named arguments labels=..., logits=...")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    if labels.dtype.is_floating_point:
        raise TypeError(f"sparse_softmax_cross_entropy_with_logits: labels must be integers, got {labels.dtype.name}")
    if labels.ndim != logits.ndim - 1:
        raise ValueError(
            f"sparse_softmax_cross_entropy_with_logits: labels of shape {labels.shape} need logits of one more "
            f"dimension, got {logits.shape}"
        )
    classes = logits.shape[-1]
    if classes is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: the number of classes must be known")
    labels = check_indices(labels, logits, logits.ndim - 1, "Received a label value of {value} which is outside "
                           "the valid range of [0, {limit}).  Label values: {values}")
    picked = one_hot(labels, classes, dtype=logits.dtype) * ops.log_softmax(logits, dim=-1)
    return -reduce_sum(picked, axis=-1)


@tf_op("logistic_loss")
def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name: str | None = None) -> Tensor:
    """Elementwise logistic loss of `labels` in [0, 1] under sigmoid(logits), computed stably."""
    x, z = _labels_logits("sigmoid_cross_entropy_with_logits", labels, logits, _sentinel)
    return ops.relu(x) - x * z + ops.log1p(ops.exp(-ops.abs(x)))


@tf_op("L2Loss")
def l2_loss(t, name: str | None = None) -> Tensor:
    """sum(t ** 2) / 2."""
    return reduce_sum(ops.square(convert_to_tensor(t))) / 2


@tf_op("BiasAdd")
def bias_add(value, bias, data_format: str | None = None, name: str | None = None) -> Tensor:
    """value + bias along the channel axis (the last for NHWC)."""
    x = convert_to_tensor(value)
    b = convert_to_tensor(bias, dtype_hint=x.dtype)
    if data_format == "NCHW":
        b = ops.reshape(b, (-1,) + (1,) * (x.ndim - 2))
    return x + b


@tf_op("embedding_lookup")
def embedding_lookup(params, ids, name: str | None = None) -> Tensor:
    """Rows of `params` at `ids`."""
    return gather(params, ids)


# --- convolution and pooling ----------------------------------------------------------------------------
def _hw(values, what: str, data_format: str) -> tuple:
    """(h, w) from TF's 4-vector [1, h, w, 1] (NHWC) / [1, 1, h, w] (NCHW), a pair or an int."""
    if values is None:
        return (1, 1)
    if isinstance(values, int):
        return (values, values)
    values = [int(v) for v in values]
    if len(values) == 1:
        return (values[0], values[0])
    if len(values) == 2:
        return tuple(values)
    if len(values) == 4:
        n, c = (0, 3) if data_format == "NHWC" else (0, 1)
        if values[n] != 1 or values[c] != 1:
            raise ValueError(f"{what} {values}: the batch and channel entries must be 1")
        return (values[1], values[2]) if data_format == "NHWC" else (values[2], values[3])
    raise ValueError(f"{what} must have 1, 2 or 4 entries, got {values}")


def _same_pads(op: str, size, k: int, stride: int, dilation: int = 1) -> tuple:
    """TF's SAME padding along one axis: output ceil(size / stride), the odd pixel after."""
    if size is None:
        raise ValueError(f"{op}: SAME padding needs the spatial size; this input's is unknown")
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _pads(op: str, padding, h, w, kh, kw, stride, dilation=(1, 1)) -> tuple:
    """(top, bottom, left, right) for 'SAME' / 'VALID'."""
    mode = str(padding).upper()
    if mode == "VALID":
        return (0, 0, 0, 0)
    if mode != "SAME":
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return _same_pads(op, h, kh, stride[0], dilation[0]) + _same_pads(op, w, kw, stride[1], dilation[1])


def _to_nchw(x: Tensor, data_format: str) -> Tensor:
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    if x.ndim != 4:
        raise ValueError(f"expected a 4-D input ({data_format}), got shape {x.shape}")
    return ops.permute(x, (0, 3, 1, 2)) if data_format == "NHWC" else x


def _from_nchw(x: Tensor, data_format: str) -> Tensor:
    return ops.permute(x, (0, 2, 3, 1)) if data_format == "NHWC" else x


@tf_op("Conv2D")
def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
           dilations=None, name: str | None = None, filters=None) -> Tensor:
    """2-D convolution of an NHWC input with an HWIO filter, 'SAME' or 'VALID' padding as TF."""
    x = _to_nchw(convert_to_tensor(input), data_format)
    w = convert_to_tensor(filter if filter is not None else filters, dtype_hint=x.dtype)
    if w.ndim != 4:
        raise ValueError(f"conv2d: the filter must be 4-D [height, width, in, out], got shape {w.shape}")
    stride = _hw(strides, "strides", data_format)
    dilation = _hw(dilations, "dilations", data_format)
    kh, kw = w.shape[0], w.shape[1]
    top, bottom, left, right = _pads("conv2d", padding, x.shape[2], x.shape[3], kh, kw, stride, dilation)
    if (top, left) != (bottom, right):
        x = ops.pad(x, (left, right, top, bottom))  # TF puts the odd padding pixel after: asymmetric
        top = left = 0
    out = ops.conv2d(x, ops.permute(w, (3, 2, 0, 1)), stride=stride, padding=(top, left), dilation=dilation)
    return _from_nchw(out, data_format)


@tf_op("MaxPool")
def max_pool(value, ksize, strides, padding, data_format: str = "NHWC", name: str | None = None,
             input=None) -> Tensor:
    """Max over windows of an NHWC input; SAME padding never picks a padded position."""
    x = _to_nchw(convert_to_tensor(value if value is not None else input), data_format)
    k, s = _hw(ksize, "ksize", data_format), _hw(strides, "strides", data_format)
    top, bottom, left, right = _pads("max_pool", padding, x.shape[2], x.shape[3], k[0], k[1], s)
    if top or bottom or left or right:
        lowest = -np.inf if x.dtype.is_floating_point else np.iinfo(x.dtype.np).min
        x = ops.pad(x, (left, right, top, bottom), value=lowest)
    return _from_nchw(ops.max_pool2d(x, k, s), data_format)


@tf_op("AvgPool")
def avg_pool(value, ksize, strides, padding, data_format: str = "NHWC", name: str | None = None,
             input=None) -> Tensor:
    """Mean over windows of an NHWC input; with SAME padding, padded positions are not counted (as TF)."""
    x = _to_nchw(convert_to_tensor(value if value is not None else input), data_format)
    k, s = _hw(ksize, "ksize", data_format), _hw(strides, "strides", data_format)
    top, bottom, left, right = _pads("avg_pool", padding, x.shape[2], x.shape[3], k[0], k[1], s)
    if not (top or bottom or left or right):
        return _from_nchw(ops.avg_pool2d(x, k, s), data_format)
    h, w = x.shape[2], x.shape[3]
    ones = np.pad(np.ones((h, w)), ((top, bottom), (left, right)))
    win = np.lib.stride_tricks.sliding_window_view(ones, k)[:: s[0], :: s[1]]
    counts = constant(win.sum(axis=(-2, -1)) / (k[0] * k[1]), dtype=x.dtype)  # share of real pixels per window
    padded = ops.pad(x, (left, right, top, bottom))
    return _from_nchw(ops.avg_pool2d(padded, k, s) / counts, data_format)


# --- normalisation ------------------------------------------------------------------------------------------
@tf_op("moments")
def moments(x, axes, shift=None, name: str | None = None, keep_dims=None, keepdims=None) -> tuple:
    """(mean, variance) of x over `axes`, as TF1 computes them (the variance around a mean seen as a constant)."""
    keep = bool(keepdims if keepdims is not None else keep_dims or False)
    x = convert_to_tensor(x)
    axes = [int(a) for a in axes]
    mean = reduce_mean(x, axes, keepdims=True, name="mean")
    variance = reduce_mean(squared_difference(x, stop_gradient(mean)), axes, keepdims=True, name="variance")
    if not keep:
        mean, variance = squeeze(mean, axes), squeeze(variance, axes)
    return mean, variance


@tf_op("batchnorm")
def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name: str | None = None) -> Tensor:
    """(x - mean) * scale / sqrt(variance + eps) + offset, in TF1's order of operations (offset/scale may be None)."""
    x = convert_to_tensor(x)
    inv = rsqrt(convert_to_tensor(variance, dtype_hint=x.dtype) + variance_epsilon)
    if scale is not None:
        inv = inv * convert_to_tensor(scale, dtype_hint=x.dtype)
    shift = -convert_to_tensor(mean, dtype_hint=x.dtype) * inv
    if offset is not None:
        shift = convert_to_tensor(offset, dtype_hint=x.dtype) + shift
    return x * inv + shift


# --- dropout ---------------------------------------------------------------------------------------------
@tf_op("dropout")
def dropout(x, keep_prob=None, noise_shape=None, seed=None, name: str | None = None, rate=None) -> Tensor:
    """Zero each element with probability 1 - keep_prob and scale the rest by 1 / keep_prob (a new mask every run)."""
    x = convert_to_tensor(x)
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout: give exactly one of keep_prob and rate")
    keep = keep_prob if rate is None else (1 - rate if not is_symbolic(rate) else 1 - convert_to_tensor(rate))
    if not is_symbolic(keep):
        keep = float(keep)
        if not 0 < keep <= 1:
            raise ValueError(f"dropout: keep_prob must be in (0, 1], got {keep}")
        if keep == 1:
            return x
    shape = tuple(x.shape) if noise_shape is None else tuple(noise_shape)
    u = random_tensor(random_ops.random_uniform_op, shape, x.dtype, seed,
                      like=x if any(d is None for d in shape) else None, low=0.0, high=1.0)
    mask = ops.floor(u + keep)
    return x / keep * mask
