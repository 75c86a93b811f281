"""`Muon`: momentum whose update matrix is orthogonalised by a Newton-Schulz iteration in bfloat16 (Jordan et al.)."""

from __future__ import annotations

import math
from typing import Any

from ember import dispatch
from ember.dtypes import bfloat16, float32
from ember.optim.optimizer import Optimizer, ParamsT, defaults_from
from ember.tensor import Tensor

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5
_ADJUSTMENTS = (None, "original", "match_rms_adamw")


def _addmm_bf16(input: Tensor, mat1: Tensor, mat2: Tensor, beta: float, alpha: float) -> Tensor:
    """beta * input + alpha * mat1 @ mat2 of bfloat16 matrices as PyTorch's CPU kernel computes it: in float32,
    rounded to bfloat16 once (ember.addmm rounds the product first)."""
    product = mat1.to(float32) @ mat2.to(float32)
    if alpha != 1:
        product.mul_(alpha)
    return product.add_(input.to(float32).mul(beta)).to(bfloat16)


def zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int,
                               eps: float) -> Tensor:
    """A bfloat16 approximation of the orthogonal factor U V^T of a matrix U S V^T: `ns_steps` steps of the
    quintic Newton-Schulz iteration with coefficients (a, b, c), as PyTorch's Muon computes it."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    ortho = grad.to(bfloat16)
    wide = grad.shape[0] > grad.shape[1]
    if wide:  # iterate on the side whose Gram matrix is smaller
        ortho = ortho.T
    ortho = ortho.div(ortho.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = ortho @ ortho.T
        gram_update = _addmm_bf16(gram, gram, gram, beta=b, alpha=c)
        ortho = _addmm_bf16(ortho, gram_update, ortho, beta=a, alpha=1)
    return ortho.T if wide else ortho


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape) -> float:
    """The learning rate scaled for the matrix's shape (A, B): sqrt(max(1, A / B)) ('original', the default) or
    0.2 * sqrt(max(A, B)) ('match_rms_adamw', so that AdamW's lr and weight decay carry over)."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


def muon(params, grads, momentum_buffers, *, lr, weight_decay, momentum, nesterov: bool, ns_coefficients,
         ns_steps: int, eps, adjust_lr_fn: str | None) -> None:
    """The Muon update of each (2-D) parameter in place (PyTorch's functional form)."""
    for param, grad, buf in zip(params, grads, momentum_buffers):
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if nesterov else buf
        update = zeropower_via_newtonschulz(update, ns_coefficients, ns_steps, eps)
        param.mul_(1 - lr * weight_decay)
        param.add_(update.to(param.dtype), alpha=-adjusted_lr(lr, adjust_lr_fn, param.shape))


class Muon(Optimizer):
    """Muon, PyTorch's formulation, for the 2-D weights of hidden layers (optimize the rest with AdamW).

    B = lerp(B, g, 1 - momentum); the update, B (or lerp(g, B, momentum) with `nesterov`), is orthogonalised by
    `ns_steps` Newton-Schulz steps in bfloat16; p *= 1 - lr * weight_decay, then p -= adjusted lr * update.
    """

    _nonnegative = ("lr", "momentum", "weight_decay")
    _state = ("momentum_buffer",)
    _functional = staticmethod(muon)

    def __init__(self, params: ParamsT, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS, adjust_lr_fn: str | None = None) -> None:
        super().__init__(params, defaults_from(locals()))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{tuple(p.shape)}")

    def _check_options(self, options: dict[str, Any]) -> None:
        super()._check_options(options)
        if options.get("adjust_lr_fn") not in _ADJUSTMENTS:
            raise ValueError(f"Muon: adjust learning rate function {options['adjust_lr_fn']!r} is not supported "
                             "(expected None, 'original' or 'match_rms_adamw')")

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        if dispatch.current_tracer() is not None:
            # ns_steps is a loop count and the coefficients feed Python arithmetic in bfloat16's rounding rule.
            raise RuntimeError("Muon.step cannot run under ember.jit or ember.compile; step it eagerly")
        super()._update(group, params, hp)
