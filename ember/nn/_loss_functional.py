"""Loss functions (the loss half of nn.functional): each returns a per-element loss reduced by `reduction`."""

from __future__ import annotations

import math
import warnings

from ember import creation, dtypes, ops
from ember.amp.state import autocast_function
from ember.errors import DtypeError
from ember.ops._rules import refuse_mixed
from ember.ops.cross_entropy import cross_entropy as _fused_cross_entropy
from ember.ops.cross_entropy import fused_applies as _fused_cross_entropy_applies
from ember.ops.loss_domain import binary_cross_entropy as _binary_cross_entropy
from ember.ops.loss_domain import gaussian_variance as _gaussian_variance
from ember.ops.nn_extra import nll_loss as _nll
from ember.tensor import Tensor


def legacy_reduction(size_average: bool | None, reduce: bool | None) -> str:
    """Map PyTorch's deprecated size_average/reduce flags to a reduction string."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _float_inputs(op: str, *tensors: Tensor) -> None:
    """Refuse integer and bool inputs to a loss, as PyTorch does, instead of computing in floating point."""
    if any(t is not None and not t.is_floating_point() for t in tensors):
        got = " and ".join(t.dtype.name for t in tensors if t is not None)
        raise DtypeError(f"{op}: expected floating-point {'input' if len(tensors) == 1 else 'input and target'}, "
                         f"got {got}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    return loss


def _warn_size(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=3,
        )


def _weighted(loss: Tensor, weight: Tensor | None, reduction: str, mean_by_weight: bool) -> Tensor:
    """Elementwise weights as PyTorch's mse/l1/huber losses apply them."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return ops.sum(loss) / ops.sum(weight)
    return _reduce(loss, reduction)


# --- regression ---------------------------------------------------------------------------------
@autocast_function("fp32")
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """(input - target)^2."""
    _float_inputs("mse_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    return _weighted(ops.square(input - target), weight, reduction, True)


@autocast_function("fp32")
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """|input - target|."""
    _float_inputs("l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    return _weighted(ops.abs(input - target), weight, reduction, True)


@autocast_function("fp32")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""
    _float_inputs("smooth_l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    if beta < 0:
        raise ValueError("smooth_l1_loss does not support negative values for beta.")
    diff = input - target
    d = ops.abs(diff)
    if beta == 0.0:
        return _reduce(d, reduction)
    return _reduce(ops.where(d >= beta, d - 0.5 * beta, (0.5 / beta) * _square_inside(diff, d, beta)), reduction)


@autocast_function("fp32")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _float_inputs("huber_loss", input, target)
    reduction = _reduction(None, None, reduction)
    _warn_size(input, target)
    diff = input - target
    d = ops.abs(diff)
    loss = ops.where(d >= delta, delta * (d - 0.5 * delta), 0.5 * _square_inside(diff, d, delta))
    return _weighted(loss, weight, reduction, False)


def _square_inside(diff: Tensor, d: Tensor, bound: float) -> Tensor:
    """diff^2 where |diff| < bound (or diff is NaN), and 0 elsewhere: the branch `where` does not pick must have a
    finite gradient too, or an infinite diff gives inf * 0 = NaN (PyTorch's gradient there is +-1, or +-delta);
    a NaN diff keeps the quadratic branch, whose gradient is NaN as PyTorch's."""
    inside = ops.where(d >= bound, 0.0, diff)
    return inside * inside


@autocast_function("fp32")
def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi with full=True)."""
    _float_inputs("gaussian_nll_loss", input, target)
    reduction = _reduction(None, None, reduction)
    if not isinstance(var, Tensor):
        var = creation.full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    # negative entries refused; the rest clamped at eps for stability, the gradient let through unchanged
    var = _gaussian_variance(var, eps)
    loss = 0.5 * (ops.log(var) + ops.square(input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@autocast_function("fp32")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """exp(input) - target * input (log_input) or input - target * log(input + eps)."""
    reduction = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = ops.exp(input) - target * input
    else:
        loss = input - target * ops.log(input + eps)
    if full:
        safe = ops.where(target > 1, target, 1.0)
        stirling = safe * ops.log(safe) - safe + 0.5 * ops.log(2 * math.pi * safe)
        loss = loss + ops.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


# --- classification ------------------------------------------------------------------------------
def _check_class_target(op: str, target: Tensor) -> None:
    """Class indices are int64 (or uint8) as PyTorch takes them: an int32 or bool target is refused, not read."""
    if target.dtype not in (dtypes.int64, dtypes.uint8):
        raise DtypeError(f"{op}: target must hold class indices as int64 (or uint8), got {target.dtype.name} "
                         f"of shape {tuple(target.shape)}")


@autocast_function("fp32")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """-input[n, target[n]] (weighted), for log-probabilities input (N, C, ...) and class indices target."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_class_target("nll_loss", target)
    unbatched = input.ndim == 1
    if unbatched:
        if target.ndim != 0:
            raise ValueError(f"nll_loss: 1-D input needs a 0-D target, got target shape {tuple(target.shape)}")
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    elif input.ndim < 1:
        raise ValueError("nll_loss: input must have at least 1 dimension")
    if target.ndim == 0 or input.shape[0] != target.shape[0]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
            f"({target.shape[0] if target.ndim else 0})."
        )
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    if weight is not None and tuple(weight.shape) != (input.shape[1],):
        raise ValueError(f"weight tensor should be defined either for all {input.shape[1]} classes or no classes "
                         f"but got weight tensor of shape: {list(weight.shape)}")
    loss = _nll(input, target, weight, ignore_index, reduction)  # one fused op (see ember.ops.nn_extra)
    return loss.squeeze(0) if unbatched and reduction == "none" else loss


@autocast_function("fp32")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1, or 0 for 1-D input) followed by the negative log-likelihood.

    target holds class indices (integer, shape of input without the class dim) or class
    probabilities (floating point, the shape of input).
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    _float_inputs("cross_entropy", input)
    if not (target.is_floating_point() and tuple(target.shape) == tuple(input.shape)):
        _check_class_target("cross_entropy", target)  # a float target of another shape is not probabilities
        refuse_mixed("cross_entropy", ("input", "weight"), input, weight)  # PyTorch: "expected scalar type ..."
    if _fused_cross_entropy_applies(input, target, weight, label_smoothing):
        return _fused_cross_entropy(input, target, ignore_index, reduction)  # log_softmax and nll_loss as one op
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = ops.log_softmax(input, class_dim)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes
    if target.is_floating_point():
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"cross_entropy: probability targets must have the input's shape {tuple(input.shape)}, "
                             f"got {tuple(target.shape)}")
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        if reduction == "none":
            return -ops.sum(prod, class_dim)
        if reduction == "sum":
            return -ops.sum(prod)
        return -ops.sum(prod) / (input.numel() // n_classes if input.numel() else float("nan"))
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0.0:
        return nll
    ignore = target == ignore_index
    per_class = logp if weight is None else logp * weight.reshape(wshape)
    smooth = ops.where(ignore, 0.0, -ops.sum(per_class, class_dim))
    if reduction == "mean":
        if weight is None:
            smooth = ops.sum(smooth) / ops.sum(~ignore)
        else:
            safe = ops.where(ignore, 0, target)
            tw = ops.where(ignore, 0.0, ops.index_select(weight, 0, safe.reshape(-1)).reshape(tuple(safe.shape)))
            smooth = ops.sum(smooth) / ops.sum(tw)
    elif reduction == "sum":
        smooth = ops.sum(smooth)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


@autocast_function("fp32")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """-(t log p + (1 - t) log(1 - p)) for probabilities p (logs clamped at -100, as PyTorch)."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size."
        )
    loss = _binary_cross_entropy(input, target)  # PyTorch's clamps and finite gradient at 0 and 1 (ops/loss_domain.py)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_function("fp32")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target), computed stably; pos_weight scales the positive term."""
    _float_inputs("binary_cross_entropy_with_logits", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({tuple(target.shape)}) must be the same as input size ({tuple(input.shape)})")
    # log(1 + exp(-x)) = softplus(-x): stable for large |x|
    sp = ops.softplus(-input)
    if pos_weight is None:
        loss = (1.0 - target) * input + sp
    else:
        loss = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_function("fp32")
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """target * (log target - input) for log-probabilities input; reduction may also be 'batchmean'."""
    _float_inputs("kl_div", input, target)
    if reduction == "batchmean":
        red = "sum"
    else:
        red = _reduction(size_average, reduce, reduction)
        if red == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the support size."
                "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                stacklevel=2,
            )
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        loss = ops.xlogy(target, target) - target * input  # 0 log 0 = 0; a negative target gives NaN, as PyTorch
    if reduction == "batchmean":
        return ops.sum(loss) / input.shape[0] if input.ndim else ops.sum(loss)
    return _reduce(loss, red)


@autocast_function("fp32")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce(ops.clamp_min(-target * (input1 - input2) + margin, 0.0), reduction)


@autocast_function("fp32")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where target is -1."""
    _float_inputs("hinge_embedding_loss", input)
    reduction = _reduction(size_average, reduce, reduction)
    loss = ops.where(target != 1, ops.clamp_min(margin - input, 0.0), 0.0) + ops.where(target != -1, input, 0.0)
    return _reduce(loss, reduction)


@autocast_function("fp32")
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input))."""
    _float_inputs("soft_margin_loss", input)
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce(ops.softplus(-target * input), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0), d the pairwise p-distance (with swap, the
    smaller of d(anchor, negative) and d(positive, negative))."""
    from ember.nn.functional import pairwise_distance

    reduction = _reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(ops.clamp_min(d_pos - d_neg + margin, 0.0), reduction)


@autocast_function("fp32")
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """The mean over classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)), per sample."""
    from ember.nn.functional import logsigmoid

    _float_inputs("multilabel_soft_margin_loss", input)
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(ops.mean(loss, input.ndim - 1), reduction)


@autocast_function("fp32")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where target is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    dim = 1 if input1.ndim == 2 else 0
    eps = 1e-12
    prod = ops.sum(input1 * input2, dim)
    denom = ops.sqrt((ops.sum(input1 * input1, dim) + eps) * (ops.sum(input2 * input2, dim) + eps))
    cos = prod / denom
    loss = ops.where(target == 1, 1.0 - cos, 0.0) + ops.where(target == -1, ops.clamp_min(cos - margin, 0.0), 0.0)
    return _reduce(loss, reduction)


@autocast_function("fp32")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """The multi-class hinge loss: per sample, the mean over classes i other than the target y of
    max(0, margin - x[y] + x[i])**p (times weight[y])."""
    _float_inputs("multi_margin_loss", input)
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p = 1 and p = 2 are supported, got {p}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    y = target.reshape(-1)
    if x.ndim != 2 or y.shape[0] != x.shape[0]:
        raise ValueError(f"multi_margin_loss: expected input (N, C) or (C,) and target (N,) or (), got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    _check_class_target("multi_margin_loss", target)
    picked = ops.gather(x, 1, y.unsqueeze(1))
    hinge = ops.relu(margin - picked + x)  # relu: no gradient where the hinge is exactly 0, as PyTorch's
    hinge = hinge * hinge if p == 2 else hinge
    others = creation.arange(x.shape[1], device=x.device).unsqueeze(0) != y.unsqueeze(1)
    hinge = ops.where(others, hinge, ops.zeros_like(hinge))
    if weight is not None:
        hinge = hinge * ops.index_select(weight, 0, y).unsqueeze(1)
    loss = ops.sum(hinge, 1) / x.shape[1]
    return _reduce(loss.reshape(()) if input.ndim == 1 else loss, reduction)


@autocast_function("fp32")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """The multi-label hinge loss: target holds each sample's classes, ended by the first -1; per sample, the sum
    over its classes j and the other classes i of max(0, 1 - (x[j] - x[i])), over the number of classes."""
    _float_inputs("multilabel_margin_loss", input)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape) or input.ndim not in (1, 2):
        raise ValueError(f"multilabel_margin_loss: expected input and target of one shape, (N, C) or (C,), got "
                         f"{tuple(input.shape)} and {tuple(target.shape)}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    t = target.unsqueeze(0) if target.ndim == 1 else target
    listed = ops.cumprod((t != -1).long(), 1) > 0  # the classes before the first -1
    classes = ops.where(listed, t, ops.zeros_like(t))
    is_target = ops.scatter_add(creation.zeros(x.shape, dtype=dtypes.int64, device=x.device), 1, classes, listed.long()) > 0
    chosen = ops.gather(x, 1, classes)  # (N, K)
    hinge = ops.relu(1 - (chosen.unsqueeze(2) - x.unsqueeze(1)))  # (N, K, C)
    keep = listed.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = ops.sum(ops.where(keep, hinge, ops.zeros_like(hinge)), (1, 2)) / x.shape[1]
    return _reduce(loss.reshape(()) if input.ndim == 1 else loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0) for any distance function d (pairwise_distance by
    default); with swap, the smaller of d(anchor, negative) and d(positive, negative)."""
    from ember.nn.functional import pairwise_distance

    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    return _reduce(ops.clamp_min(margin + d_pos - d_neg, 0.0), reduction)
