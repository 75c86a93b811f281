"""HIPS autograd's optimizers (`autograd.misc.optimizers`): sgd, rmsprop and adam over nested parameters.

Each takes `grad(x, i)` (the gradient at x on iteration i), a starting point x0 (an array, or any nesting
of lists/tuples/dicts of arrays), `callback(x, i, g)` called before every step, and `num_iters`; it
returns the final point in x0's structure. The arithmetic is autograd's, step for step, in NumPy when the
parameters are NumPy arrays (as autograd's are).
"""

from __future__ import annotations

import functools

import numpy as np

from ember.misc.flatten import flatten

__all__ = ["adam", "rmsprop", "sgd", "unflatten_optimizer"]


def unflatten_optimizer(optimize):
    """An optimizer over flat 1-D arrays -> one over nested containers of arrays, as autograd's decorator."""

    @functools.wraps(optimize)
    def _optimize(grad, x0, callback=None, *args, **kwargs):
        flat_x0, unflatten = flatten(x0)

        def flat_grad(x, i):
            return flatten(grad(unflatten(x), i))[0]

        flat_callback = None if callback is None else (lambda x, i, g: callback(unflatten(x), i, unflatten(g)))
        return unflatten(optimize(flat_grad, flat_x0, flat_callback, *args, **kwargs))

    return _optimize


def _xp(x):
    """NumPy for NumPy parameters, ember.numpy for tensors."""
    if isinstance(x, np.ndarray):
        return np
    import ember.numpy as enp

    return enp


@unflatten_optimizer
def sgd(grad, x, callback=None, num_iters: int = 200, step_size: float = 0.1, mass: float = 0.9):
    """Stochastic gradient descent with momentum; grad(x, i) is the gradient on iteration i."""
    velocity = _xp(x).zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@unflatten_optimizer
def rmsprop(grad, x, callback=None, num_iters: int = 100, step_size: float = 0.1, gamma: float = 0.9,
            eps: float = 10**-8):
    """Root-mean-square propagation."""
    xp = _xp(x)
    avg_sq_grad = xp.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g**2 * (1 - gamma)
        x = x - step_size * g / (xp.sqrt(avg_sq_grad) + eps)
    return x


@unflatten_optimizer
def adam(grad, x, callback=None, num_iters: int = 100, step_size: float = 0.001, b1: float = 0.9, b2: float = 0.999,
         eps: float = 10**-8):
    """Adam (Kingma & Ba), as autograd computes it."""
    xp = _xp(x)
    m = xp.zeros(len(x))
    v = xp.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m  # first moment estimate
        v = (1 - b2) * (g**2) + b2 * v  # second moment estimate
        mhat = m / (1 - b1 ** (i + 1))  # bias corrections
        vhat = v / (1 - b2 ** (i + 1))
        x = x - step_size * mhat / (xp.sqrt(vhat) + eps)
    return x
