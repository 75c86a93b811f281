"""`ember.func`: PyTorch's `torch.func`: functional_call, grad and grad_and_value (gradients with respect to arguments,
which may be dicts of tensors such as a module's parameters), and vmap, jacrev, jacfwd, hessian, vjp, jvp and
stack_module_state (`func_transforms.py`)."""

from __future__ import annotations

import functools

from ember.func_transforms import hessian, jacfwd, jacrev, jvp, stack_module_state, vjp, vmap
from ember.nn.utils.stateless import functional_call
from ember.transforms import grad, value_and_grad

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "stack_module_state",
           "vjp", "vmap"]


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """func -> a function returning (gradient, value) (with has_aux, (gradient, (value, aux))), torch.func's order."""
    both = value_and_grad(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        value, gradient = both(*args, **kwargs)
        return gradient, value

    return wrapped
