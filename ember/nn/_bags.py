"""`embedding_bag`: the sum, mean or max of the embeddings of each bag of indices (a row of a 2-D input, or the
stretches of a 1-D input between offsets) without the (bags, length, dim) lookups a user would otherwise build. The
bags are laid out on the host as a padded (bags, longest) index table with a mask, then one embedding lookup and a
masked reduction over the length give the values and PyTorch's gradients (max: to each bag's first maximum)."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.errors import ShapeError
from ember.tensor import Tensor

_MODES = ("sum", "mean", "max")


def _bag_table(input: np.ndarray, offsets: np.ndarray | None, include_last_offset: bool) -> tuple:
    """(the padded index table (bags, longest), each entry's position in the flat input or -1 for padding)."""
    if input.ndim == 2:
        bags, length = input.shape
        return input, np.arange(input.size).reshape(bags, length)
    n = input.shape[0]
    bounds = np.append(offsets, n) if not include_last_offset else offsets
    if bounds.size and (bounds[0] != 0 or np.any(np.diff(bounds) < 0) or bounds[-1] > n):
        raise ValueError(f"embedding_bag: offsets must start at 0 and not decrease, within the input's {n} indices, "
                         f"got {offsets.tolist()}")
    starts, ends = bounds[:-1], bounds[1:]
    longest = int((ends - starts).max()) if starts.size else 0
    position = starts[:, None] + np.arange(longest)[None, :]
    position = np.where(position < ends[:, None], position, -1)
    return np.where(position >= 0, input[np.maximum(position, 0)] if n else 0, 0), position


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """(bags, dim): each bag's embeddings summed (times per_sample_weights, with mode 'sum'), averaged or their
    elementwise max; entries equal to padding_idx are left out, and an empty bag gives zeros."""
    from ember.nn.functional import _norm_padding_idx, embedding

    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode must be one of sum, mean, max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise ValueError(f"embedding_bag: per_sample_weights is only supported for mode='sum', got mode={mode!r}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-D input (each row is a bag)")
    elif input.ndim != 1 or offsets is None or offsets.ndim != 1:
        raise ValueError(f"embedding_bag: expected a 2-D input, or a 1-D input with 1-D offsets, got input "
                         f"{tuple(input.shape)} and offsets {None if offsets is None else tuple(offsets.shape)}")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ShapeError(f"embedding_bag: per_sample_weights must have the input's shape {tuple(input.shape)}, got "
                         f"{tuple(per_sample_weights.shape)}")
    padding_idx = _norm_padding_idx(padding_idx, weight.shape[0])
    indices = np.asarray(input.detach().numpy()).astype(np.int64)
    table, position = _bag_table(indices, None if offsets is None else np.asarray(offsets.numpy()).astype(np.int64),
                                 include_last_offset)
    keep = position >= 0
    if padding_idx is not None:
        keep &= table != padding_idx
    device = weight.device
    rows = embedding(creation.tensor(table, device=device), weight, None, max_norm, norm_type, scale_grad_by_freq,
                     sparse)  # (bags, longest, dim)
    mask = creation.tensor(keep[..., None], device=device)
    if mode == "max":
        if not rows.shape[1]:  # every bag empty
            return ops.sum(rows, 1)
        best = ops.max(ops.where(mask, rows, ops.full_like(rows, float("-inf"))), 1)[0]  # the first maximum's row
        return ops.where(creation.tensor(keep.any(1)[:, None], device=device), best, ops.zeros_like(best))
    scale = mask.to(weight.dtype)
    if per_sample_weights is not None:
        flat = per_sample_weights.reshape(-1)
        picked = ops.index_select(flat, 0, creation.tensor(np.maximum(position, 0).reshape(-1), device=device))
        scale = scale * picked.reshape(position.shape + (1,))
    out = ops.sum(rows * scale, 1)
    if mode == "mean":
        out = out / creation.tensor(np.maximum(keep.sum(1), 1)[:, None], dtype=weight.dtype, device=device)
    return out
