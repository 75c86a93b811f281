"""Resetting gradients, shared by Module.zero_grad and Optimizer.zero_grad."""

from __future__ import annotations

from collections.abc import Iterable


def zero_grads(tensors: Iterable, set_to_none: bool = True) -> None:
    """Reset each tensor's .grad: to None (assigned without reading it, so a jitted step does not depend on the
    gradients that existed before the call), or zeroed in place and detached from any graph."""
    for p in tensors:
        if set_to_none:
            p.grad = None
            continue
        g = p.grad
        if g is None:
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        g.zero_()
