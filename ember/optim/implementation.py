"""PyTorch's switches between implementations of one optimizer update: `foreach`, `fused`, `capturable` and
`differentiable`, accepted with PyTorch's names so that PyTorch code constructs Ember's optimizers unchanged
(each optimizer takes the ones PyTorch's takes, and records them among its defaults).

- `fused`: None (the default) runs the compiled pass of `optim/fused.py` (generated from the update's rule)
  where it can and the tensor ops elsewhere; True requires the compiled pass for every eager update it covers
  (an error names what stops it); False always runs the tensor ops. Both give the same values bit for bit.
  Only SGD (with momentum, from its second step) and Adam/AdamW have a compiled pass; under `ember.jit` the
  update is traced as tensor ops, which the jit fuses itself.
- `foreach`: PyTorch's multi-tensor kernels. Ember has no separate multi-tensor path (its update is one
  compiled pass per parameter where it can run), so the option is checked and recorded but changes nothing.
- `capturable` (CUDA graph capture) and `differentiable` (autograd through the update) are not supported:
  False or None is accepted, True is refused.
"""

from __future__ import annotations

from typing import Any


def check(name: str, group: dict[str, Any], fused_kernel: bool) -> None:
    """Refuse a switch Ember cannot honour, with a one-line error naming the optimizer."""
    for key in ("foreach", "fused", "capturable", "differentiable"):
        value = group.get(key)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name}: {key} must be None or a bool, got {value!r}")
    if group.get("fused") and group.get("foreach"):
        raise RuntimeError(f"{name}: fused=True and foreach=True cannot be combined; choose one")
    if group.get("capturable"):
        raise NotImplementedError(f"{name}: capturable=True (CUDA graph capture) is not supported")
    if group.get("differentiable"):
        raise NotImplementedError(f"{name}: differentiable=True (autograd through the update) is not supported")
    if group.get("fused"):
        if not fused_kernel:
            raise NotImplementedError(f"{name}: fused=True: Ember has no compiled {name} update; use fused=None")
        from ember.optim.fused import compiled_available

        if not compiled_available():
            raise RuntimeError(f"{name}: fused=True needs the compiled kernels of the `jit` extra (Numba), which "
                               "are not available (not installed, or EMBER_FUSION_BACKEND=numpy)")


def fused_failed(name: str, reason: str) -> RuntimeError:
    """The error of a fused=True update that could not run compiled."""
    return RuntimeError(f"{name}: fused=True could not update a parameter in one compiled pass: {reason}")
