"""Gradient clipping: by the total norm over all parameters, or by value."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ember import creation, ops
from ember.autograd import grad_mode
from ember.tensor import Tensor


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@grad_mode.no_grad()
def get_total_norm(tensors: Iterable[Tensor], norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """The norm of all tensors taken together, as if concatenated into one vector."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    if norm_type == math.inf:
        total = ops.amax(ops.stack([ops.amax(ops.abs(t)) for t in tensors]))
    else:  # (em.norm squares float16/bfloat16 in float32: a float16 square overflows above 256)
        total = ops.norm(ops.stack([ops.norm(t.reshape(-1), norm_type) for t in tensors]), norm_type)
    if error_if_nonfinite and not bool(ops.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return total


@grad_mode.no_grad()
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Scale all gradients in place so their total norm is at most max_norm; returns the norm before clipping."""
    grads = _grads(parameters)
    if not grads:
        return creation.tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    coef = ops.clamp(float(max_norm) / (total + 1e-6), max=1.0)  # stays a tensor: no device sync
    for g in grads:
        g.mul_(coef.to(g.dtype) if coef.dtype != g.dtype else coef)
    return total


@grad_mode.no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """Deprecated name of clip_grad_norm_ (it clips in place too)."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
