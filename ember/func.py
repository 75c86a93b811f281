"""`ember.func`: PyTorch's `torch.func` names that Ember has: functional_call, and grad and grad_and_value (gradients
with respect to arguments, which may be dicts of tensors such as a module's parameters)."""

from __future__ import annotations

import functools

from ember.nn.utils.stateless import functional_call
from ember.transforms import grad, value_and_grad

__all__ = ["functional_call", "grad", "grad_and_value"]


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """func -> a function returning (gradient, value) (with has_aux, (gradient, (value, aux))), torch.func's order."""
    both = value_and_grad(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        value, gradient = both(*args, **kwargs)
        return gradient, value

    return wrapped
