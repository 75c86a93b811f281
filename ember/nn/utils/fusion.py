"""Folding an eval-mode batch norm into the convolution or linear layer before it (PyTorch's
`nn.utils.fuse_conv_bn_eval` and friends): one layer computing what the two computed, for inference."""

from __future__ import annotations

import copy

from ember import ops
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _eval_only(what: str, *modules) -> None:
    if any(m.training for m in modules):
        raise RuntimeError(f"{what}: fusion is for eval mode only (call .eval() on both layers first)")
    if modules[-1].running_mean is None:
        raise RuntimeError(f"{what}: the batch norm keeps no running statistics (track_running_stats=False)")


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                         bn_w: Tensor | None, bn_b: Tensor | None, transpose: bool = False) -> tuple:
    """(weight, bias) Parameters of a convolution followed by that eval batch norm (`transpose`: a transposed
    convolution's weight, whose output channels are dim 1), each in its original dtype."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    conv_b = ops.zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ops.ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = ops.zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = ops.rsqrt(bn_rv + bn_eps)
    shape = ((1, -1) if transpose else (-1, 1)) + (1,) * (conv_w.ndim - 2)
    weight = (conv_w * (bn_w * rsqrt).reshape(shape)).to(w_dtype)
    bias = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(b_dtype)
    return Parameter(weight.detach(), conv_w.requires_grad), Parameter(bias.detach(), conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of `conv` whose weight and bias include the eval batch norm `bn` after it."""
    _eval_only("fuse_conv_bn_eval", conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                           bn_w: Tensor, bn_b: Tensor) -> tuple:
    """(weight, bias) Parameters of a linear layer followed by that eval batch norm."""
    linear_b = ops.zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * ops.rsqrt(bn_rv + bn_eps)
    weight = linear_w * scale.unsqueeze(-1)
    bias = (linear_b - bn_rm) * scale + bn_b
    return Parameter(weight.detach(), linear_w.requires_grad), Parameter(bias.detach(), linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` whose weight and bias include the eval batch norm `bn` after it."""
    _eval_only("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ValueError(f"fuse_linear_bn_eval: the linear layer's {linear.out_features} outputs do not match the "
                         f"batch norm's {bn.num_features} features")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
