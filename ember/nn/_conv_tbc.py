"""`conv_tbc`: a 1-D convolution over (time, batch, channels) input, fairseq's layout. It is conv1d on the input
permuted to (batch, channels, time) and the (K, C_in, C_out) weight permuted to (C_out, C_in, K), so its gradients,
meta shapes and kernels are conv1d's."""

from __future__ import annotations

from ember import creation, ops
from ember.ops._rules import refuse_bool, refuse_mixed
from ember.tensor import Tensor


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """(T, B, C_in) input, (K, C_in, C_out) weight, (C_out,) bias -> (T + 2 * pad - K + 1, B, C_out)."""
    from ember.nn.functional import conv1d

    if input.ndim != 3:
        raise RuntimeError(f"conv_tbc: input must have 3 dims (time, batch, in_channels), got shape "
                           f"{tuple(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_tbc: weight must have 3 dims (kernel_width, in_channels, out_channels), got shape "
                           f"{tuple(weight.shape)}")
    if not isinstance(bias, Tensor):
        raise TypeError(f"conv_tbc: bias must be a Tensor, got {type(bias).__name__}")
    if bias.ndim != 1 or bias.shape[0] != weight.shape[2]:
        raise RuntimeError(f"conv_tbc: bias must be 1-D with the weight's {weight.shape[2]} output channels (dim 2 "
                           f"of weight {tuple(weight.shape)}), got shape {tuple(bias.shape)}")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"conv_tbc: input dim 2 (in_channels) of shape {tuple(input.shape)} must equal dim 1 of "
                           f"weight {tuple(weight.shape)}")
    refuse_bool("conv_tbc", input, weight)
    refuse_mixed("conv_tbc", ("input", "weight", "bias"), input, weight, bias)
    pad = int(pad)
    time, batch = input.shape[0], input.shape[1]
    kernel, out_channels = weight.shape[0], weight.shape[2]
    length = time + 2 * pad - kernel + 1
    if length < 0:
        raise RuntimeError(f"conv_tbc: kernel width {kernel} is longer than the input's {time} steps padded by {pad} "
                           f"(input {tuple(input.shape)}, weight {tuple(weight.shape)})")
    if pad < 0:  # PyTorch crops the input then: the steps a negative pad removes from each end
        input, pad = input[-pad:time + pad], 0
    if length == 0 or batch == 0:  # nothing to convolve (conv1d refuses a kernel longer than its input)
        # an empty result: adding the operands' sums (broadcast into nothing) gives each its zero gradient
        empty = creation.zeros((length, batch, out_channels), dtype=input.dtype, device=input.device)
        return empty + bias + ops.sum(input) + ops.sum(weight)
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)
