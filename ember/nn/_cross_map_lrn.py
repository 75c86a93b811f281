"""`cross_map_lrn2d`: PyTorch's legacy CrossMapLRN2d (Lua Torch's SpatialCrossMapLRN), x / (k + alpha / size * sum
of x**2 over a window of channels)**beta, with that implementation's window kept: its forward's running sum never
drops channel 0. The window is a (C, C) matrix applied with a matmul over the channels, so the values are PyTorch's.
The gradient is this forward's own (autograd through it); PyTorch's hand-written backward sums over a window one
channel off its forward's, which is not its derivative (docs/errors.md)."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.ops._rules import require_float
from ember.tensor import Tensor


def _forward_window(channels: int, size: int) -> np.ndarray:
    """window[d, c] = how often channel c's square enters channel d's scale, replaying PyTorch's running sum."""
    pre_pad = int((size - 1) / 2 + 1)
    window = np.zeros((channels, channels))
    window[0, :min(pre_pad, channels)] = 1
    for c in range(1, channels):
        window[c] = window[c - 1]
        if c < channels - pre_pad + 1:
            window[c, c + pre_pad - 1] += 1
        if c > pre_pad:  # PyTorch's condition: at c == pre_pad channel 0 is not taken out, and then never is
            window[c, c - pre_pad] -= 1
    return window


def cross_map_lrn2d(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """(N, C, H, W) input over (k + alpha / size * its legacy window sum of squares)**beta (torch.nn.CrossMapLRN2d)."""
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead (shape "
                         f"{tuple(input.shape)})")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"CrossMapLRN2d: size must be a positive integer, got {size!r}")
    require_float("CrossMapLRN2d", input.dtype.np)
    n, c, h, w = input.shape
    window = creation.tensor(_forward_window(c, size), dtype=input.dtype, device=input.device)
    squares = (input * input).reshape(n, c, h * w)
    scale = ops.matmul(window, squares).reshape(n, c, h, w) * (alpha / size) + k
    return input * ops.pow(scale, -beta)
