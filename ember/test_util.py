"""`ember.test_util.check_grads`: HIPS autograd's gradient checker — VJPs (reverse mode) and JVPs (forward
mode) against central finite differences along random directions, to any order.

`check_grads(fun, modes=["fwd", "rev"], order=2)(*args)` checks the derivatives of fun with respect to its
first argument (`argnum` picks another); the argument may be an array, a number or a nested container.
"""

from __future__ import annotations

import numpy as np

from ember.misc.flatten import flatten
from ember.tensor import Tensor
from ember.transforms import make_jvp, make_vjp

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6

__all__ = ["check_grads", "check_jvp", "check_vjp"]


def _scalar_close(a: float, b: float) -> bool:
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _vector(value) -> np.ndarray:
    """Any nesting of arrays, numbers and tensors as one float64 NumPy vector."""
    flat = flatten(value)[0]
    if isinstance(flat, Tensor):
        flat = flat.detach().numpy()
    return np.asarray(flat, dtype=np.float64)


def _random_like(value, rng):
    flat, unflatten = flatten(value)
    return unflatten(rng.standard_normal(np.shape(np.asarray(flat.detach().numpy() if isinstance(flat, Tensor)
                                                                  else flat))))


def _numerical_jvp(f, x, v):
    """(f(x + v eps/2) - f(x - v eps/2)) / eps, as a vector."""
    flat_x, unflatten = flatten(x)
    flat_x = np.asarray(flat_x.detach().numpy() if isinstance(flat_x, Tensor) else flat_x, dtype=np.float64)
    flat_v = _vector(v)
    plus = _vector(f(unflatten(flat_x + flat_v * EPS / 2)))
    minus = _vector(f(unflatten(flat_x - flat_v * EPS / 2)))
    return (plus - minus) / EPS


def check_vjp(f, x, rng=None) -> None:
    """<VJP(f)(x)(u), v> equals <u, finite-difference J v> for random u and v (AssertionError otherwise)."""
    rng = rng or np.random.default_rng()
    vjp, y = make_vjp(f)(x)
    v, u = _random_like(x, rng), _random_like(y, rng)
    exact = float(np.dot(_vector(vjp(u)), _vector(v)))
    numeric = float(np.dot(_vector(u), _numerical_jvp(f, x, v)))
    assert _scalar_close(numeric, exact), (
        f"derivative (VJP) check of {getattr(f, '__name__', f)} failed at {x}:\nanalytic: {exact}\nnumeric:  {numeric}")


def check_jvp(f, x, rng=None) -> None:
    """JVP(f)(x)(v) equals the finite-difference J v along a random direction (AssertionError otherwise)."""
    rng = rng or np.random.default_rng()
    v = _random_like(x, rng)
    exact = _vector(make_jvp(f)(x)(v)[1])
    numeric = _numerical_jvp(f, x, v)
    w = rng.standard_normal(exact.shape)
    a, b = float(np.dot(exact, w)), float(np.dot(numeric, w))
    assert _scalar_close(a, b), (
        f"derivative (JVP) check of {getattr(f, '__name__', f)} failed at {x}:\nanalytic: {a}\nnumeric:  {b}")


def check_grads(fun, argnum: int = 0, modes=("fwd", "rev"), order: int = 2):
    """fun -> a function of fun's arguments that checks fun's derivatives up to `order` (see the module doc)."""
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad:
        raise ValueError(f"check_grads: modes must be 'fwd' and/or 'rev', got {bad}")

    def check(*args, **kwargs):
        args = list(args)

        def f(x):
            return fun(*(args[:argnum] + [x] + args[argnum + 1:]), **kwargs)

        f.__name__ = getattr(fun, "__name__", "fun")
        _check(f, args[argnum], tuple(modes), order, np.random.default_rng(0))

    return check


def _check(f, x, modes, order, rng) -> None:
    if "fwd" in modes:
        check_jvp(f, x, rng)
        if order > 1:
            def jvp_f(xv):
                return make_jvp(f)(xv[0])(xv[1])[1]

            jvp_f.__name__ = f"jvp_{f.__name__}"
            _check(jvp_f, (x, _random_like(x, rng)), modes, order - 1, rng)
    if "rev" in modes:
        check_vjp(f, x, rng)
        if order > 1:
            def vjp_f(xv):
                return make_vjp(f)(xv[0])[0](xv[1])

            vjp_f.__name__ = f"vjp_{f.__name__}"
            y = f(x)
            _check(vjp_f, (x, _random_like(y, rng)), modes, order - 1, rng)
