"""`unfold` and `fold`: sliding blocks of an image as columns (im2col) and their sum back into an image (col2im),
as gathers and index-adds of the padded image, so their gradients are each other's and exact."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.nn._tuples import _pair
from ember.tensor import Tensor


def _positions(op: str, hw, kernel_size, dilation, padding, stride):
    """The padded image's size, and each block element's flat position in it: (kh*kw, oh*ow)."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_pair(a) for a in (kernel_size, dilation, padding, stride))
    if min(kh, kw, dh, dw, sh, sw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and padding non-negative, got "
                         f"{(kh, kw)}, {(dh, dw)}, {(sh, sw)} and {(ph, pw)}")
    hp, wp = hw[0] + 2 * ph, hw[1] + 2 * pw
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: a {hw[0]}x{hw[1]} image padded by {(ph, pw)} is smaller than the dilated "
                         f"{kh}x{kw} kernel")
    rows = np.arange(oh)[:, None] * sh
    cols = np.arange(ow)[None, :] * sw
    taps = [((rows + i * dh) * wp + cols + j * dw).reshape(-1) for i in range(kh) for j in range(kw)]
    return (hp, wp), (ph, pw), np.stack(taps), kh * kw, oh * ow


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """(N, C, H, W) to (N, C*kh*kw, L): each sliding block's values as a column (PyTorch's nn.functional.unfold)."""
    if input.ndim not in (3, 4):
        raise ValueError(f"unfold: expected a 3-D or 4-D input, got shape {tuple(input.shape)}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    (hp, wp), (ph, pw), taps, k, blocks = _positions("unfold", (h, w), kernel_size, dilation, padding, stride)
    flat = ops.pad(x, (pw, pw, ph, ph)).reshape(n, c, hp * wp)
    out = ops.index_select(flat, 2, creation.tensor(taps.reshape(-1), device=x.device)).reshape(n, c * k, blocks)
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """unfold's adjoint: (N, C*kh*kw, L) columns summed back into an (N, C, H, W) image (overlaps add up)."""
    if input.ndim not in (2, 3):
        raise ValueError(f"fold: expected a 2-D or 3-D input, got shape {tuple(input.shape)}")
    cols = input if input.ndim == 3 else input.unsqueeze(0)
    h, w = _pair(output_size)
    (hp, wp), (ph, pw), taps, k, blocks = _positions("fold", (h, w), kernel_size, dilation, padding, stride)
    n, ck, length = cols.shape
    if ck % k or length != blocks:
        raise ValueError(f"fold: expected input of shape (N, C*{k}, {blocks}) for output size {(h, w)}, got "
                         f"{tuple(input.shape)}")
    c = ck // k
    image = ops.zeros_like_shape(cols, (n, c, hp * wp))
    image = ops.index_add(image, 2, creation.tensor(taps.reshape(-1), device=cols.device),
                          cols.reshape(n, c, k * blocks))
    out = image.reshape(n, c, hp, wp)[:, :, ph:ph + h, pw:pw + w]
    return out if input.ndim == 3 else out.squeeze(0)
