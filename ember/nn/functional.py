"""Stateless layer functions (PyTorch's torch.nn.functional), composed from Ember ops.

Losses live in `ember.nn._loss_functional` and are re-exported here, so `F.cross_entropy` works.
"""

from __future__ import annotations

import math

import numpy as np

from ember import creation, dtypes, ops
from ember.amp.state import autocast_function
from ember.autograd import grad_mode
from ember.errors import DtypeError
from ember.nn._bags import embedding_bag  # noqa: F401  (re-exported: F.embedding_bag)
from ember.nn._conv_tbc import conv_tbc  # noqa: F401  (re-exported: F.conv_tbc)
from ember.nn._ctc import ctc_loss  # noqa: F401  (re-exported: F.ctc_loss)
from ember.nn._fractional_pool import (  # noqa: F401  (re-exported: F.fractional_max_pool2d, ...)
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from ember.nn._loss_functional import (  # noqa: F401  (re-exported: F.<loss> is the public name)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from ember.nn._multi_head import multi_head_attention_forward  # noqa: F401  (re-exported: F.<its name>)
from ember.nn._patches import fold, unfold  # noqa: F401  (re-exported: F.unfold and F.fold)
from ember.nn._sampling import affine_grid, grid_sample  # noqa: F401  (re-exported: F.affine_grid, F.grid_sample)
from ember.nn._tuples import _pair, _single
from ember.nn._unpool import max_unpool1d, max_unpool2d, max_unpool3d  # noqa: F401  (re-exported: F.max_unpool*)
from ember.nn._volumetric import (  # noqa: F401  (re-exported: F.conv3d, F.max_pool3d, ...)
    adaptive_avg_pool3d,
    adaptive_max_pool3d,
    avg_pool3d,
    conv3d,
    conv_transpose3d,
    lp_pool3d,
    max_pool3d,
)
from ember.ops._rules import refuse_bool, refuse_mixed, require_float
from ember.ops.attention import safe_softmax as _safe_softmax
from ember.ops.attention import scaled_dot_product_attention as _fused_attention
from ember.ops.channel_affine import batch_norm_inference
from ember.ops.indexing import index_select
from ember.ops.nn_extra import batch_norm_train as _fused_batch_norm
from ember.ops.nn_extra import layer_norm as _fused_layer_norm
from ember.ops.nn_extra import linear as _fused_linear
from ember.ops.opmath import upcast_tensor as _upcast
from ember.tensor import Tensor

pad = ops.pad
one_hot = ops.one_hot


# --- activations ------------------------------------------------------------------------
def _float_input(op: str, *tensors: Tensor) -> None:
    """Refuse integer and bool tensors where PyTorch has no integer kernel (its NotImplementedError "not
    implemented for 'Long'"), rather than compute in floating point or truncate back to integers."""
    for t in tensors:
        require_float(op, t.dtype.np)


def _no_bool(op: str, t: Tensor) -> None:
    if t.dtype == dtypes.bool_:
        raise DtypeError(f"{op}: not defined for bool tensors")


def _maybe_inplace(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    """Write out into input for inplace=True when no gradient is recorded through it.

    With autograd on, most of these ops save their input for backward, so writing over it would
    invalidate the graph; the out-of-place result is returned instead (same values).
    """
    if inplace and not (grad_mode.is_grad_enabled() and input.requires_grad):
        return input.copy_(out)
    return out


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else ops.relu(input)


def relu_(input: Tensor) -> Tensor:
    """max(x, 0) in place."""
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val] (an integer tensor stays one for whole-number bounds, as in PyTorch)."""
    _no_bool("hardtanh", input)
    if not input.is_floating_point() and float(min_val).is_integer() and float(max_val).is_integer():
        min_val, max_val = int(min_val), int(max_val)
    return _maybe_inplace(input, ops.clamp(input, min_val, max_val), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x for x > 0, negative_slope * x otherwise."""
    return _maybe_inplace(input, ops.leaky_relu(input, negative_slope=negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    return _maybe_inplace(input, ops.elu(input, alpha=alpha), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants."""
    _float_input("selu", input)
    return _maybe_inplace(input, ops.elu(input, alpha=_SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    _float_input("celu", input)
    return _maybe_inplace(input, ops.elu(input / alpha) * alpha, inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), exactly ('none') or with the tanh approximation."""
    return ops.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    return _maybe_inplace(input, ops.silu(input), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    _float_input("mish", input)
    return _maybe_inplace(input, input * ops.tanh(ops.softplus(input)), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    _float_input("hardsigmoid", input)
    return _maybe_inplace(input, ops.clamp(input + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    _float_input("hardswish", input)
    return _maybe_inplace(input, input * (ops.clamp(input + 3.0, 0.0, 6.0) / 6.0), inplace)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return ops.tanh(input)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably."""
    _float_input("logsigmoid", input)
    return -ops.softplus(-input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear above the threshold."""
    return ops.softplus(input, beta=beta, threshold=threshold)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    _no_bool("softsign", input)
    return input / (ops.abs(input) + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - ops.tanh(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value."""
    return _maybe_inplace(input, ops.where(input > threshold, input, value), inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0 (a NaN stays NaN)."""
    _float_input("hardshrink", input)
    return ops.where((input >= -lambd) & (input <= lambd), ops.zeros_like(input), input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0 (a NaN stays NaN); lambd >= 0."""
    _float_input("softshrink", input)
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lambd}")
    # the values inside [-lambd, lambd] zero, the rest moved lambd towards zero (a NaN's gradient passes, as PyTorch's)
    return ops.where((input >= -lambd) & (input <= lambd), ops.zeros_like(input), input - ops.sign(input) * lambd)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: in training, x * a for x <= 0 with a drawn from U(lower, upper) for each value (a fresh
    draw per call); otherwise leaky_relu with the slope (lower + upper) / 2."""
    _float_input("rrelu", input)
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: expected 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    np_dtype = input.dtype.np
    slope = creation._random(input.device, tuple(input.shape), np_dtype,
                             lambda g, shape: g.uniform(shape, np_dtype, lower, upper), False, like=input)
    return _maybe_inplace(input, ops.where(input > 0, input, input * slope), inplace)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """rrelu in place."""
    return rrelu(input, lower, upper, training, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """elu in place."""
    return elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """selu in place."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """celu in place."""
    return celu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """leaky_relu in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """hardtanh in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """threshold in place."""
    return _maybe_inplace(input, ops.where(input > threshold, input, value), True)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x for x > 0, weight * x otherwise (weight per channel, dim 1)."""
    _float_input("prelu", input, weight)
    refuse_mixed("prelu", ("input", "weight"), input, weight)
    if weight.numel() != 1 and input.ndim >= 2:
        weight = weight.reshape((1, -1) + (1,) * (input.ndim - 2))
    return ops.where(input > 0, input, input * weight)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    _float_input("glu", input)
    if input.shape[dim] % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {dim} is size {input.shape[dim]}")
    a, b = ops.chunk(input, 2, dim)
    return a * ops.sigmoid(b)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim."""
    return ops.softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along dim."""
    return ops.softmax(-input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """log(softmax(x)) along dim, computed stably."""
    return ops.log_softmax(input, dim, dtype)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along dim."""
    _float_input("normalize", input)
    return input / ops.clamp_min(ops.norm(input, p, dim, True), eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between x1 and x2 along dim (each norm clamped to eps)."""
    _float_input("cosine_similarity", x1, x2)
    n1 = ops.clamp_min(ops.norm(x1, 2, dim, True), eps)
    n2 = ops.clamp_min(ops.norm(x2, 2, dim, True), eps)
    return ops.sum((x1 / n1) * (x2 / n2), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p along the last dim."""
    return ops.norm(x1 - x2 + eps, p, -1, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between the rows of a 2-D input, i < j in row-major order: (N * (N - 1) / 2,)."""
    _float_input("pdist", input)
    if input.ndim != 2:
        raise ValueError(f"pdist: expected a 2-D input (rows, features), got shape {tuple(input.shape)}")
    n = input.shape[0]
    i, j = np.triu_indices(n, 1)
    rows = creation.tensor(i, device=input.device), creation.tensor(j, device=input.device)
    return ops.norm(index_select(input, 0, rows[0]) - index_select(input, 0, rows[1]), p, 1)


# --- linear and convolution ------------------------------------------------------------------
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias."""
    refuse_bool("linear", input, weight)
    if weight.ndim == 2:
        return _fused_linear(input, weight, bias)
    refuse_mixed("linear", ("input", "weight", "bias"), input, weight, bias)
    out = ops.matmul(input, weight.T)
    return out if bias is None else out + bias


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x1^T A x2 + b for each output feature (weight is (out, in1, in2))."""
    refuse_mixed("bilinear", ("input1", "input2", "weight", "bias"), input1, input2, weight, bias)
    out = ops.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2-D cross-correlation over (N, C, H, W) input."""
    return ops.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) input (run as conv2d with a unit height)."""
    refuse_bool("conv1d", input, weight)
    refuse_mixed("conv1d", ("input", "weight", "bias"), input, weight, bias)
    if weight.ndim != 3:
        raise ValueError(f"conv1d: expected a 3-D weight (out, in/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise ValueError(f"conv1d: expected 2-D or 3-D input, got shape {tuple(input.shape)}")
    if not isinstance(padding, str):
        padding = (0, _single(padding)[0])
    out = ops.conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, _single(stride)[0]), padding,
                    (1, _single(dilation)[0]), groups)
    return out.squeeze(-2)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 2-D convolution (weight is (in, out/groups, kh, kw))."""
    return ops.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 1-D convolution (run as conv_transpose2d with a unit height)."""
    refuse_bool("conv_transpose1d", input, weight)
    refuse_mixed("conv_transpose1d", ("input", "weight"), input, weight)
    out = ops.conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, _single(stride)[0]),
                              (0, _single(padding)[0]), (0, _single(output_padding)[0]), groups,
                              (1, _single(dilation)[0]))
    return out.squeeze(-2)


# --- pooling --------------------------------------------------------------------------------
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max over kernel windows (with return_indices, also the flat h*W+w input positions)."""
    return ops.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max over windows of the last dim."""
    stride = kernel_size if stride is None or stride == [] or stride == () else stride
    out = ops.max_pool2d(input.unsqueeze(-2), (1, _single(kernel_size)[0]), (1, _single(stride)[0]),
                        (0, _single(padding)[0]), (1, _single(dilation)[0]), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Mean over kernel windows."""
    return ops.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over windows of the last dim."""
    stride = kernel_size if stride is None or stride == [] or stride == () else stride
    out = ops.avg_pool2d(input.unsqueeze(-2), (1, _single(kernel_size)[0]), (1, _single(stride)[0]),
                        (0, _single(padding)[0]), ceil_mode, count_include_pad)
    return out.squeeze(-2)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum of x**p over each window)**(1/p), PyTorch's formula: the windows' mean of x**p times their size."""
    kh, kw = _pair(kernel_size)
    if norm_type == float("inf"):
        return max_pool2d(input, (kh, kw), stride, 0, 1, ceil_mode)
    out = avg_pool2d(ops.pow(input, norm_type), (kh, kw), stride, 0, ceil_mode)
    return ops.pow(ops.sign(out) * ops.relu(ops.abs(out)) * (kh * kw), 1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """lp_pool2d over windows of the last dim."""
    k = _single(kernel_size)[0]
    if norm_type == float("inf"):
        return max_pool1d(input, k, stride, 0, 1, ceil_mode)
    out = avg_pool1d(ops.pow(input, norm_type), k, stride, 0, ceil_mode)
    return ops.pow(ops.sign(out) * ops.relu(ops.abs(out)) * k, 1.0 / norm_type)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """x / (k + alpha * mean of x**2 over `size` neighbouring channels)**beta (AlexNet's normalisation)."""
    _float_input("local_response_norm", input)
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3-D or higher input (N, C, ...), got shape "
                         f"{tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    squares = (input * input).reshape(n, 1, c, -1)  # the channels as rows of one image, the positions as columns
    squares = ops.pad(squares, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(squares, (size, 1), stride=1).reshape(input.shape)
    return input / ops.pow(div * alpha + k, beta)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed (H, W) output size."""
    _float_input("adaptive_avg_pool2d", input)
    return ops.adaptive_avg_pool2d(input, output_size)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling of the last dim to a fixed length."""
    _float_input("adaptive_avg_pool1d", input)
    return ops.adaptive_avg_pool2d(input.unsqueeze(-2), (1, _single(output_size)[0])).squeeze(-2)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling to a fixed (H, W) output size (PyTorch's start/end window rule); with return_indices, also each
    maximum's flat h * W + w input position. Each maximum is its window's first, and takes the whole gradient."""
    _float_input("adaptive_max_pool2d", input)
    oh, ow = _pair(output_size)
    h, w = input.shape[-2], input.shape[-1]
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    if h % oh == 0 and w % ow == 0:
        return ops.max_pool2d(input, (h // oh, w // ow), return_indices=return_indices)
    positions = []
    with grad_mode.no_grad():
        for i in range(oh):
            h0, h1 = (i * h) // oh, math.ceil((i + 1) * h / oh)
            for j in range(ow):
                w0, w1 = (j * w) // ow, math.ceil((j + 1) * w / ow)
                k = ops.argmax(input[..., h0:h1, w0:w1].flatten(-2), -1)
                positions.append((k // (w1 - w0) + h0) * w + k % (w1 - w0) + w0)
    indices = ops.stack(positions, -1)
    out = ops.gather(input.flatten(-2), -1, indices).reshape(tuple(input.shape[:-2]) + (oh, ow))
    return (out, indices.reshape(out.shape)) if return_indices else out


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of the last dim to a fixed length (with return_indices, also each maximum's position)."""
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, _single(output_size)[0]), return_indices)
    return (out[0].squeeze(-2), out[1].squeeze(-2)) if return_indices else out.squeeze(-2)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """max_pool1d with its indices."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """max_pool2d with its indices."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool1d with its indices."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool2d with its indices."""
    return adaptive_max_pool2d(input, output_size, True)


# --- normalisation --------------------------------------------------------------------------
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) by batch statistics (training) or running ones (eval).

    In training, running_mean/running_var (if given) are updated in place with `momentum`, the
    variance stored unbiased, as PyTorch does.
    """
    _float_input("batch_norm", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input (N, C, ...), got shape {tuple(input.shape)}")
    c = input.shape[1]
    given = [(what, t) for what, t in (("running_mean", running_mean), ("running_var", running_var),
                                       ("weight", weight), ("bias", bias)) if t is not None]
    for what, t in given:
        if tuple(t.shape) != (c,):
            raise ValueError(f"batch_norm: {what} should have shape ({c},), one value per channel of the input "
                             f"{tuple(input.shape)}, got {tuple(t.shape)}")
    _check_norm_dtypes("batch_norm", input, given, "running statistics, weight and bias")
    if training:
        n = input.numel() // c if c else 0
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(input.shape)}")
        out, mean, var = _fused_batch_norm(input, weight, bias, eps)
        if running_mean is not None or running_var is not None:
            with grad_mode.no_grad():
                if running_mean is not None:
                    running_mean.mul_(1.0 - momentum).add_(mean.detach().to(running_mean.dtype) * momentum)
                if running_var is not None:
                    unbiased = var.detach().to(running_var.dtype) * (n / (n - 1))
                    running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
        return out
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var are required when training=False")
    # eval: one scale and one shift per channel (in float32 for float16/bfloat16 statistics), then one pass
    # over the input (ember/ops/channel_affine.py); float16/bfloat16 inputs run in float32 and round once.
    x = _upcast(input)
    out = batch_norm_inference(x, running_mean, running_var, weight, bias, eps)
    return out if x is input else out.to(input.dtype)


def _check_norm_dtypes(op: str, input: Tensor, given: list, what: str = "weight and bias") -> None:
    """PyTorch's rule for a normalisation's parameters: they share one dtype, the input's, or float32 for a float16
    or bfloat16 input (mixed precision); anything else is refused rather than computed in a promoted dtype."""
    given = [(name, t) for name, t in given if t is not None]
    own = input.dtype
    if all(t.dtype is own for _, t in given):  # (the common case, decided first)
        return
    dtypes_given = {t.dtype for _, t in given}
    allowed = (input.dtype, dtypes.float32) if input.dtype in (dtypes.float16, dtypes.bfloat16) else (input.dtype,)
    if len(dtypes_given) > 1 or dtypes_given.pop() not in allowed:
        got = ", ".join(f"{name} {t.dtype.name}" for name, t in given)
        raise DtypeError(f"{op}: the {what} must share one dtype, the input's "
                         f"({input.dtype.name}{' or float32' if len(allowed) > 1 else ''}); got {got}")


def _check_normalized_shape(input: Tensor, normalized_shape) -> tuple:
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise ValueError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size {list(input.shape)}"
        )
    return tuple(range(-k, 0))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing `normalized_shape` dims, then scale and shift."""
    _float_input("layer_norm", input)
    dims = _check_normalized_shape(input, normalized_shape)
    _check_norm_dtypes("layer_norm", input, [("weight", weight), ("bias", bias)])
    return _fused_layer_norm(input, len(dims), weight, bias, eps)[0]


def _machine_eps(dtype) -> float:
    """The gap between 1 and the next value of a floating dtype (torch.finfo(dtype).eps)."""
    if dtype.name == "bfloat16":  # 7 fraction bits; NumPy's finfo does not know ml_dtypes' type
        return 2.0**-7
    return float(np.finfo(dtype.np).eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing dims, times weight."""
    _float_input("rms_norm", input)
    dims = _check_normalized_shape(input, normalized_shape)
    if eps is None:
        eps = _machine_eps(input.dtype)
    x = _upcast(input)  # float16/bfloat16 in float32: squares above 65504 overflow float16
    out = x * ops.rsqrt(ops.mean(x * x, dims, True) + eps)
    if weight is not None:
        out = out * _upcast(weight)
    # the input's dtype whatever the weight's, as PyTorch's rms_norm returns
    return out if out.dtype is input.dtype else out.to(input.dtype)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over groups of channels (and all spatial positions) per sample."""
    _float_input("group_norm", input)
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected at least 2-D input (N, C, ...), got shape {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise ValueError(f"group_norm: expected number of channels {c} to be divisible by num_groups={num_groups}")
    _check_norm_dtypes("group_norm", input, [("weight", weight), ("bias", bias)])
    x = _upcast(input)  # float16/bfloat16: normalise, scale and shift in float32, round once
    out = _fused_layer_norm(x.reshape(n, num_groups, -1), 1, None, None, eps)[0].reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * _upcast(weight).reshape(shape)
    if bias is not None:
        out = out + _upcast(bias).reshape(shape)
    return out if x is input else out.to(input.dtype)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its spatial positions."""
    _float_input("instance_norm", input)
    _check_norm_dtypes("instance_norm", input, [("weight", weight), ("bias", bias)])
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    dims = tuple(range(2, input.ndim))
    x = _upcast(input)  # float16/bfloat16: statistics and the centred input in float32, rounded once at the end
    mean = ops.mean(x, dims, True)
    xc = x - mean
    var = ops.mean(xc * xc, dims, True)
    if running_mean is not None or running_var is not None:
        n = 1
        for d in dims:
            n *= input.shape[d]
        with grad_mode.no_grad():
            if running_mean is not None:
                batch_mean = ops.mean(mean.detach(), (0,) + dims) * momentum
                running_mean.mul_(1.0 - momentum).add_(batch_mean.to(running_mean.dtype))
            if running_var is not None:
                batch_var = ops.mean(var.detach(), (0,) + dims) * (momentum * n / max(n - 1, 1))
                running_var.mul_(1.0 - momentum).add_(batch_var.to(running_var.dtype))
    out = xc * ops.rsqrt(var + eps)
    shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * _upcast(weight).reshape(shape)
    if bias is not None:
        out = out + _upcast(bias).reshape(shape)
    return out if x is input else out.to(input.dtype)


# --- dropout ----------------------------------------------------------------------------------
def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input: Tensor, keep: float, mask_shape: tuple, scale=1):
    # PyTorch's mask on the CPU: bernoulli_(keep) (a float64 uniform per value) on empty_like(input) (in the input's
    # memory order) or on a fresh tensor of the channel mask's shape, times `scale` in the input's dtype
    np_dtype = input.dtype.np
    like = input if tuple(mask_shape) == tuple(input.shape) else None
    return creation._random(input.device, mask_shape, np_dtype,
                            lambda g, shape: g.bernoulli(keep, shape, np_dtype) * scale, False, like=like)


def _dropout_with_mask_shape(input: Tensor, p: float, mask_shape: tuple, inplace: bool) -> Tensor:
    if p == 1.0:
        out = input * 0.0
    else:
        keep = 1.0 - p
        np_dtype = input.dtype.np
        acc = np.float64 if np_dtype == np.float64 else np.float32  # 16-bit floats divide in float32, then round
        out = input * _keep_mask(input, keep, mask_shape, np_dtype.type(acc(1) / acc(keep)))
    return _maybe_inplace(input, out, inplace)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p (a fresh mask per call) and scale the rest by 1/(1-p)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    _float_input("dropout", input)  # a scaled integer would be truncated
    return _dropout_with_mask_shape(input, p, tuple(input.shape), inplace)


def _channel_dropout(input: Tensor, p: float, training: bool, inplace: bool, spatial: int, name: str) -> Tensor:
    _check_p(p)
    if not training or p == 0.0:
        return input
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{name}: expected {spatial + 1}-D or {spatial + 2}-D input, got shape {tuple(input.shape)}")
    mask_shape = tuple(input.shape[: input.ndim - spatial]) + (1,) * spatial
    return _dropout_with_mask_shape(input, p, mask_shape, inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) input with probability p."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) input with probability p."""
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) input with probability p."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d")


_ALPHA_PRIME = _SELU_ALPHA * _SELU_SCALE  # the value SELU tends to for large negative inputs, negated


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool, mask_shape: tuple, name: str) -> Tensor:
    # dropped values set to SELU's negative saturation -alpha', then an affine a * x + b that keeps a zero-mean,
    # unit-variance input so (PyTorch's _dropout_impl with alpha)
    _check_p(p)
    if not training or p == 0.0:
        return input
    _float_input(name, input)
    if p == 1.0:
        return _maybe_inplace(input, input * 0.0, inplace)
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    mask = _keep_mask(input, 1.0 - p, mask_shape)
    out = input * (mask * a) + ((mask - 1) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p)
    return _maybe_inplace(input, out, inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped values take SELU's negative saturation, and the result is rescaled so a
    zero-mean, unit-variance input keeps its mean and variance (training mode only)."""
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape), "alpha_dropout")


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """alpha_dropout of whole channels (dim 1) of a (N, C, ...) input."""
    if training and input.ndim < 2:
        raise ValueError(f"feature_alpha_dropout: expected an input with a channel dim, got shape {tuple(input.shape)}")
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape[:2]) + (1,) * (input.ndim - 2),
                          "feature_alpha_dropout")


# --- embedding --------------------------------------------------------------------------------
def _norm_padding_idx(padding_idx, num_embeddings: int):
    if padding_idx is None:
        return None
    if padding_idx > 0 and padding_idx >= num_embeddings:
        raise ValueError("Padding_idx must be within num_embeddings")
    if padding_idx < 0:
        if padding_idx < -num_embeddings:
            raise ValueError("Padding_idx must be within num_embeddings")
        padding_idx += num_embeddings
    return padding_idx


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale, in place, the referenced rows whose norm exceeds max_norm (PyTorch's embedding_renorm_)."""
    rows = creation.tensor(np.unique(np.asarray(input.detach())), device=weight.device)
    with grad_mode.no_grad():
        picked = index_select(weight, 0, rows, caller="embedding")
        norms = ops.norm(picked, norm_type, 1, True)
        scale = ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = picked * scale


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` picked by the integer `input`; the padding_idx row gets no gradient."""
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq=True is not supported")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported; use sparse=False")
    padding_idx = _norm_padding_idx(padding_idx, weight.shape[0])
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    out = index_select(weight, 0, input.reshape(-1), caller="embedding").reshape(tuple(input.shape) + (weight.shape[1],))
    if padding_idx is not None and out.requires_grad:
        # Same values; the gradient only flows to rows other than padding_idx.
        out = ops.where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return out


# --- attention --------------------------------------------------------------------------------
@autocast_function("lower")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(Q K^T * scale + mask) V over the last two dims.

    A bool attn_mask marks positions that may be attended (True); a float mask is added to the
    scores. is_causal applies a lower-triangular mask; dropout_p drops attention weights.
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
    if not query.dtype == key.dtype == value.dtype:  # PyTorch refuses to promote here too (a RuntimeError)
        raise RuntimeError(f"scaled_dot_product_attention: expected query, key and value of one dtype, got "
                        f"{query.dtype}, {key.dtype} and {value.dtype}")
    if attn_mask is not None and attn_mask.dtype not in (dtypes.bool_, dtypes.float32, query.dtype):
        raise DtypeError(f"scaled_dot_product_attention: expected a bool, float32 or {query.dtype.name} (the "
                         f"query's dtype) attn_mask, got {attn_mask.dtype.name}")
    _float_input("scaled_dot_product_attention", query)
    L, S = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = _repeat_heads(key, rep)
        value = _repeat_heads(value, rep)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if (dropout_p == 0.0 and query.ndim >= 2 and key.ndim == query.ndim == value.ndim
            and tuple(query.shape[:-2]) == tuple(key.shape[:-2]) == tuple(value.shape[:-2])
            and query.is_floating_point()):
        return _fused_attention(query, key, value, attn_mask, scale, is_causal)  # one op (ember/ops/attention.py)
    scores = ops.matmul(query * scale, key.transpose(-2, -1))
    if is_causal:
        causal = creation.tensor(np.tril(np.ones((L, S), dtype=bool)), device=query.device)
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == dtypes.bool_:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    attn = _safe_softmax(scores)  # a query that may attend nowhere gets weights 0, as in PyTorch
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return ops.matmul(attn, value)


def _repeat_heads(x: Tensor, rep: int) -> Tensor:
    """(..., H, S, E) -> (..., H*rep, S, E), each head repeated rep times in a row."""
    shape = tuple(x.shape)
    x = x.unsqueeze(-3).expand(shape[:-2] + (rep,) + shape[-2:])
    return x.reshape(shape[:-3] + (shape[-3] * rep,) + shape[-2:])


# --- resampling ------------------------------------------------------------------------------
def _linear_indices(in_size: int, out_size: int, scale, align_corners: bool):
    """Source positions (i0, i1) and weights w1 for linear interpolation along one dim."""
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = dst * ((in_size - 1) / (out_size - 1)) if out_size > 1 else np.zeros(out_size)
    else:
        ratio = (1.0 / scale) if scale is not None else in_size / out_size
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, src - i0


def _cubic_taps(in_size: int, out_size: int, scale, align_corners: bool):
    """The four source positions (clamped into the input) and weights of bicubic interpolation along one dim:
    cubic convolution with A = -0.75 around each output's source position, which is not clamped at 0."""
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = dst * ((in_size - 1) / (out_size - 1)) if out_size > 1 else np.zeros(out_size)
    else:
        src = (dst + 0.5) * ((1.0 / scale) if scale is not None else in_size / out_size) - 0.5
    first = np.floor(src)
    t = src - first
    a = -0.75
    near = lambda d: ((a + 2) * d - (a + 3)) * d * d + 1  # noqa: E731 - |d| <= 1
    far = lambda d: ((a * d - 5 * a) * d + 8 * a) * d - 4 * a  # noqa: E731 - 1 < |d| < 2
    taps = [np.clip(first - 1 + k, 0, in_size - 1).astype(np.int64) for k in range(4)]
    return taps, [far(t + 1), near(t), near(1 - t), far(2 - t)]


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r*r, H, W) rearranged to (*, C, H*r, W*r): each group of r*r channels becomes an r x r block."""
    r = int(upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ValueError(f"pixel_shuffle: expected (*, C*{r * r}, H, W) input, got shape {tuple(input.shape)}")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """pixel_shuffle's inverse: (*, C, H*r, W*r) to (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    if input.ndim < 3 or input.shape[-1] % r or input.shape[-2] % r:
        raise ValueError(f"pixel_unshuffle: expected height and width divisible by {r}, got shape "
                         f"{tuple(input.shape)}")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """softmax((logits + Gumbel noise) / tau); with hard=True, the one-hot of its argmax in the forward pass and
    the soft sample's gradient (straight through)."""
    gumbels = -ops.log(ops.empty_like(logits).exponential_())  # -log of Exp(1) draws, as PyTorch samples them
    soft = ops.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = ops.argmax(soft, dim, keepdim=True)
    one_hot = ops.scatter(ops.zeros_like(soft), dim, index, 1.0)
    return one_hot - soft.detach() + soft


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims: mode 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear' or
    'area'."""
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if not (input.is_floating_point() or (input.dtype == dtypes.uint8 and mode in ("nearest", "nearest-exact"))):
        # PyTorch resizes uint8 images too, rounding linear modes; ember copies uint8 pixels (nearest) only
        raise DtypeError(f"interpolate: mode {mode!r} needs a floating-point input, got {input.dtype.name}")
    spatial = input.ndim - 2
    if spatial < 1:
        raise ValueError(f"interpolate: expected at least 3-D input (N, C, ...), got shape {tuple(input.shape)}")
    in_sizes = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out_sizes = (size,) * spatial if isinstance(size, int) else tuple(size)
        scales = (None,) * spatial
    else:
        scales = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        out_sizes = tuple(int(math.floor(s * f)) for s, f in zip(in_sizes, scales))
        if recompute_scale_factor:
            scales = (None,) * spatial
    if mode == "area":  # PyTorch's 'area' is adaptive average pooling to the output size
        if spatial == 1:
            return adaptive_avg_pool1d(input, out_sizes[0])
        if spatial == 2:
            return adaptive_avg_pool2d(input, out_sizes)
        raise NotImplementedError(f"interpolate: mode 'area' takes 3-D or 4-D input, got shape {tuple(input.shape)}")
    out = input
    for k, (n_in, n_out, sc) in enumerate(zip(in_sizes, out_sizes, scales)):
        dim = 2 + k
        if mode in ("nearest", "nearest-exact"):
            ratio = (1.0 / sc) if sc is not None else n_in / n_out
            dst = np.arange(n_out, dtype=np.float64)
            src = np.floor((dst + 0.5) * ratio) if mode == "nearest-exact" else np.floor(dst * ratio)
            idx = np.minimum(src.astype(np.int64), n_in - 1)
            out = ops.index_select(out, dim, creation.tensor(idx, device=input.device))
        elif mode in ("linear", "bilinear", "trilinear"):
            i0, i1, w1 = _linear_indices(n_in, n_out, sc, bool(align_corners))
            wshape = (n_out,) + (1,) * (input.ndim - 1 - dim)
            w1 = creation.tensor(w1.reshape(wshape), dtype=input.dtype, device=input.device)
            a = ops.index_select(out, dim, creation.tensor(i0, device=input.device))
            b = ops.index_select(out, dim, creation.tensor(i1, device=input.device))
            out = a + (b - a) * w1
        elif mode == "bicubic":
            if spatial != 2:
                raise ValueError(f"interpolate: mode 'bicubic' takes 4-D input, got shape {tuple(input.shape)}")
            taps, weights = _cubic_taps(n_in, n_out, sc, bool(align_corners))
            wshape = (n_out,) + (1,) * (input.ndim - 1 - dim)
            terms = [ops.index_select(out, dim, creation.tensor(i, device=input.device))
                     * creation.tensor(wt.reshape(wshape), dtype=input.dtype, device=input.device)
                     for i, wt in zip(taps, weights)]
            out = terms[0] + terms[1] + terms[2] + terms[3]
        else:
            raise ValueError(f"interpolate: mode must be nearest, nearest-exact, linear, bilinear, bicubic, "
                             f"trilinear or area, got {mode!r}")
    return out


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    """Deprecated alias of interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(mode="nearest")."""
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(mode="bilinear", align_corners=True)."""
    return interpolate(input, size, scale_factor, "bilinear", align_corners=True)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) with its channels taken group by group in turn (ShuffleNet): channel g * (C / groups) + k moves
    to k * groups + g."""
    if groups <= 0 or input.ndim < 2 or input.shape[1] % groups:
        raise ValueError(f"channel_shuffle: the channels (dim 1) of shape {tuple(input.shape)} must divide into "
                         f"{groups} groups")
    n, c = input.shape[:2]
    rest = tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = True):
    """max_pool3d with its indices."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool3d with its indices."""
    return adaptive_max_pool3d(input, output_size, True)
