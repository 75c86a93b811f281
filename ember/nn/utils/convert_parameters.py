"""Flatten parameters into one vector and write a vector back into them."""

from __future__ import annotations

from collections.abc import Iterable

from ember import ops
from ember.autograd import grad_mode
from ember.tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    return ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of vec into the parameters, in order (in place)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: expected a 1-D vector, got shape {tuple(vec.shape)}")
    pointer = 0
    with grad_mode.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(p.shape))
            pointer += n
