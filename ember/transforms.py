"""Function transforms in the style of JAX and HIPS autograd: grad, value_and_grad."""

from __future__ import annotations

import functools

import numpy as np

from ember import autograd
from ember.grad_mode import enable_grad, is_grad_enabled
from ember.tensor import Tensor


def _as_input(x):
    """A tensor to differentiate with respect to, and how to give its gradient back."""
    if isinstance(x, Tensor):
        if x.requires_grad:
            return x, "tensor", True  # already part of an outer differentiation: keep the link
        if not x.is_floating_point():
            x = x.double() if x.dtype.name == "int64" else x.float()
        return x.detach().requires_grad_(True), "tensor", False
    kind = "numpy" if isinstance(x, np.ndarray) else "scalar"
    arr = np.asarray(x)
    if arr.dtype.kind not in "f":
        arr = arr.astype(np.float64)
    from ember.creation import tensor

    return tensor(arr, requires_grad=True), kind, False


def _give_back(g, kind, nested):
    if nested or kind == "tensor":
        return g
    arr = g.detach().numpy()
    return arr if kind == "numpy" else arr.item()


def _check_scalar(out, name):
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}: the function must return a scalar tensor; use has_aux=True to return (value, aux)")
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}: the function must return a tensor, got {type(out).__name__}")
    if out.numel() != 1:
        raise TypeError(f"{name}: the function must return a scalar (one element), got shape {tuple(out.shape)}")


def value_and_grad(fun, argnums=0, has_aux: bool = False, *, argnum=None):
    """fun -> a function returning (fun(*args), d fun / d args[argnums])."""
    if argnum is not None:
        argnums = argnum
    multi = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multi else (argnums,)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        args = list(args)
        for n in nums:
            if n >= len(args):
                raise TypeError(f"grad: argnums {n} but the function was called with {len(args)} positional arguments")
        prepared = {n: _as_input(args[n]) for n in nums}
        for n, (t, _, _) in prepared.items():
            args[n] = t
        # Inside another grad (or on inputs that are already being differentiated) the result must
        # stay connected to the outer graph.
        nested = any(p[2] for p in prepared.values()) or (_DEPTH[0] > 0 and is_grad_enabled())
        _DEPTH[0] += 1
        try:
            with enable_grad():
                out = fun(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("value_and_grad: has_aux=True needs the function to return (value, aux)")
            out, aux = out
        _check_scalar(out, "grad")
        inputs = [prepared[n][0] for n in nums]
        if not out.requires_grad:
            grads = [t * 0.0 for t in inputs]
        else:
            grads = autograd.grad(out, inputs, create_graph=nested, allow_unused=True)
            grads = [g if g is not None else t.detach() * 0.0 for g, t in zip(grads, inputs)]
        grads = [_give_back(g, prepared[n][1], nested) for g, n in zip(grads, nums)]
        result = tuple(grads) if multi else grads[0]
        value = out if nested else out.detach()
        if has_aux:
            return (value, aux), result
        return value, result

    return wrapped


_DEPTH = [0]  # how many transformed functions are running (per process; transforms are not threaded)


def grad(fun, argnums=0, has_aux: bool = False, *, argnum=None):
    """fun -> a function returning d fun / d args[argnums] (also accepts HIPS autograd's `argnum`)."""
    vg = value_and_grad(fun, argnums, has_aux, argnum=argnum)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        value_aux, g = vg(*args, **kwargs)
        if has_aux:
            return g, value_aux[1]
        return g

    return wrapped
