"""`ctc_loss`: connectionist temporal classification (Graves et al., 2006), the negative log-likelihood of a target
sequence summed over every alignment of it to the input's time steps (blanks between and around the labels, labels
repeated). The forward variables alpha are computed in log space over the extended label sequence (a blank before,
between and after the labels) one time step at a time, the whole batch at once, so autograd gives the gradient with
respect to the log-probabilities. A time step past a sample's input length leaves its alphas as they are."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.errors import ShapeError
from ember.tensor import Tensor


def _logsumexp(*terms: Tensor) -> Tensor:
    """log(sum(exp(terms))), -inf where every term is -inf, with a zero (not NaN) gradient there."""
    top = terms[0]
    for t in terms[1:]:
        top = ops.maximum(top, t)
    finite = ops.isfinite(top)
    shift = ops.where(finite, top, ops.zeros_like(top)).detach()
    total = None
    for t in terms:
        e = ops.exp(t - shift)
        total = e if total is None else total + e
    empty = total == 0
    safe = ops.where(empty, ops.ones_like(total), total)
    return ops.where(empty, ops.full_like(total, float("-inf")), ops.log(safe) + shift)


def _lengths(name: str, lengths, batch: int) -> np.ndarray:
    values = np.asarray(lengths.numpy() if isinstance(lengths, Tensor) else lengths).astype(np.int64).reshape(-1)
    if values.shape != (batch,):
        raise ShapeError(f"ctc_loss: {name} must have one length per sample ({batch}), got {values.shape[0]}")
    return values


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss of log_probs (T, N, C) (log-softmax outputs; (T, C) for one sample) against targets (N, S)
    padded, or all N concatenated in 1-D; 'mean' divides each sample's loss by its target length, then averages."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"ctc_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.ndim == 1 else targets
    if log_probs.ndim != 3:
        raise ShapeError(f"ctc_loss: expected log_probs (T, N, C) or (T, C), got shape {tuple(log_probs.shape)}")
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise ValueError(f"ctc_loss: blank {blank} is not one of the {classes} classes")
    t_len = _lengths("input_lengths", input_lengths, batch)
    s_len = _lengths("target_lengths", target_lengths, batch)
    if np.any(t_len > steps) or np.any(t_len < 0) or np.any(s_len < 0):
        raise ValueError(f"ctc_loss: input lengths {t_len.tolist()} must be within the {steps} time steps, and "
                         "target lengths non-negative")
    labels = np.asarray(targets.numpy()).astype(np.int64)
    if labels.ndim == 1:  # concatenated: split by the target lengths
        if labels.size != s_len.sum():
            raise ShapeError(f"ctc_loss: 1-D targets hold {labels.size} labels, the target lengths sum to "
                             f"{s_len.sum()}")
        starts = np.concatenate([[0], np.cumsum(s_len)[:-1]])
        padded = np.full((batch, max(int(s_len.max(initial=0)), 1)), blank, np.int64)
        for n in range(batch):
            padded[n, :s_len[n]] = labels[starts[n]:starts[n] + s_len[n]]
        labels = padded
    elif labels.shape[0] != batch or labels.shape[1] < s_len.max(initial=0):
        raise ShapeError(f"ctc_loss: targets {labels.shape} must be (N={batch}, S) with S at least the longest target "
                         f"length {s_len.max(initial=0)}")
    live = np.arange(labels.shape[1])[None, :] < s_len[:, None]
    if np.any(live & ((labels < 0) | (labels >= classes) | (labels == blank))):
        raise ValueError(f"ctc_loss: targets must be class indices in [0, {classes}) other than the blank {blank}")
    width = 2 * labels.shape[1] + 1
    extended = np.full((batch, width), blank, np.int64)
    extended[:, 1::2] = np.where(live, labels, blank)
    # a label may also come from two places back: past a blank, when the label two back differs from it
    skip = np.zeros((batch, width), bool)
    skip[:, 3::2] = extended[:, 3::2] != extended[:, 1:-2:2]
    device = log_probs.device
    index = creation.tensor(extended, device=device)
    neg_inf = float("-inf")
    alpha = None
    for t in range(steps):
        emit = ops.gather(log_probs[t], 1, index)  # (N, width): each extended position's log-probability now
        if alpha is None:
            start = np.full((batch, width), neg_inf)
            start[:, :2] = 0.0
            start[s_len == 0, 1] = neg_inf
            alpha = emit + creation.tensor(start, dtype=log_probs.dtype, device=device)
            continue
        pad1 = ops.pad(alpha, (1, 0), value=neg_inf)[:, :-1]
        pad2 = ops.pad(alpha, (2, 0), value=neg_inf)[:, :-2]
        pad2 = ops.where(creation.tensor(skip, device=device), pad2, ops.full_like(pad2, neg_inf))
        step = _logsumexp(alpha, pad1, pad2) + emit
        alpha = ops.where(creation.tensor((t < t_len)[:, None], device=device), step, alpha)
    last = creation.tensor(np.stack([2 * s_len, np.maximum(2 * s_len - 1, 0)], 1), device=device)
    ends = ops.gather(alpha, 1, last)
    ends = ops.where(creation.tensor(np.stack([np.ones(batch, bool), s_len > 0], 1), device=device), ends,
                     ops.full_like(ends, neg_inf))
    loss = -_logsumexp(ends[:, 0], ends[:, 1])
    if np.any(t_len == 0):  # no time steps: only an empty target has an alignment
        empty_input = creation.tensor(t_len == 0, device=device)
        loss = ops.where(empty_input, ops.where(creation.tensor(s_len == 0, device=device), ops.zeros_like(loss),
                                                ops.full_like(loss, float("inf"))), loss)
    if zero_infinity:
        loss = ops.where(ops.isinf(loss), ops.zeros_like(loss), loss)
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return ops.sum(loss)
    return ops.mean(loss / creation.tensor(np.maximum(s_len, 1), dtype=loss.dtype, device=device))
