"""Function transforms in the style of JAX and HIPS autograd: grad, value_and_grad."""

from __future__ import annotations

import functools
import sys

import numpy as np

from ember import autograd
from ember.autograd.grad_mode import enable_grad, is_grad_enabled
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

    # NumPy data is differentiated as an ember.numpy.ndarray: inside the function it behaves as NumPy
    # does (HIPS autograd's boxes), and its gradient comes back as a NumPy array or number.
    return adopt(tensor(arr, requires_grad=True)), kind, False


def _give_back(g, kind, nested):
    if nested or kind == "tensor":
        return g
    arr = g.detach().numpy()
    return arr if kind == "numpy" else arr.item()


def _is_ndarray(x) -> bool:
    numpy_api = sys.modules.get("ember.numpy")
    return numpy_api is not None and isinstance(x, numpy_api.ndarray)


def adopt(t):
    """t as an ember.numpy.ndarray (imported on first use, so `import ember` does not load ember.numpy)."""
    from ember.numpy._ndarray import adopt as _adopt

    return _adopt(t)


def _check_scalar(out, name):
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}: the function must return a scalar tensor; use has_aux=True to return (value, aux)")
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}: the function must return a tensor, got {type(out).__name__}")
    if out.numel() != 1:
        raise TypeError(f"{name}: the function must return a scalar (one element), got shape {tuple(out.shape)}")


def _is_numeric(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray, np.generic, int, float)) and not isinstance(x, (bool, np.bool_))


def _flatten(x, leaves: list):
    """Leaves of nested lists/tuples/dicts in order, and a spec to rebuild the structure."""
    if isinstance(x, dict):
        return ("dict", type(x), [(k, _flatten(v, leaves)) for k, v in x.items()])
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x), [_flatten(v, leaves) for v in x])
    if isinstance(x, (list, tuple)):
        return ("seq", type(x), [_flatten(v, leaves) for v in x])
    leaves.append(x)
    return None


def _unflatten(spec, leaves):
    """Rebuild the structure `_flatten` described from an iterator of new leaves."""
    if spec is None:
        return next(leaves)
    kind, cls, children = spec
    if kind == "dict":
        return cls((k, _unflatten(c, leaves)) for k, c in children)
    if kind == "namedtuple":
        return cls(*(_unflatten(c, leaves) for c in children))
    return cls(_unflatten(c, leaves) for c in children)


def value_and_grad(fun, argnums=0, has_aux: bool = False, *, argnum=None):
    """fun -> a function returning (fun(*args), d fun / d args[argnums]).

    Arguments may be tensors, NumPy arrays, numbers, or nested lists/tuples/dicts of them (HIPS
    autograd's containers); each gradient has the structure and kind of its argument.
    """
    if argnum is not None:
        argnums = argnum
    multi = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multi else (argnums,)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        args = list(args)
        for n in nums:
            if not -len(args) <= n < len(args):
                raise TypeError(f"grad: argnums {n} but the function was called with {len(args)} positional arguments")
        specs, prepared = {}, {}
        for n in nums:
            leaves: list = []
            specs[n] = _flatten(args[n], leaves)
            prepared[n] = [_as_input(x) if _is_numeric(x) else (x, "static", False) for x in leaves]
            args[n] = _unflatten(specs[n], iter(p[0] for p in prepared[n]))
        # Inside another grad (or on inputs that are already being differentiated) the result must
        # stay connected to the outer graph.
        nested = any(p[2] for ps in prepared.values() for p in ps) or (_DEPTH[0] > 0 and is_grad_enabled())
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
        flat = [(n, k) for n in nums for k, p in enumerate(prepared[n]) if p[1] != "static"]
        inputs = [prepared[n][k][0] for n, k in flat]
        if not out.requires_grad or not inputs:
            grads = [t.detach() * 0.0 for t in inputs]
        else:
            grads = autograd.grad(out, inputs, create_graph=nested, allow_unused=True)
            grads = [g if g is not None else t.detach() * 0.0 for g, t in zip(grads, inputs)]
        by_leaf = {key: _give_back(g, prepared[key[0]][key[1]][1], nested) for key, g in zip(flat, grads)}
        results = []
        for n in nums:
            new_leaves = (by_leaf.get((n, k)) for k in range(len(prepared[n])))
            results.append(_unflatten(specs[n], new_leaves))
        result = tuple(results) if multi else results[0]
        value = out if nested else (adopt(out.detach()) if _is_ndarray(out) else out.detach())
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
