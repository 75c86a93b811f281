"""Function transforms in the style of JAX and HIPS autograd: grad, value_and_grad, and autograd's make_vjp,
make_jvp, elementwise_grad, jacobian, hessian, hessian_tensor_product and tensor_jacobian_product."""

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
        if _is_ndarray(x):  # an ember.numpy array stays one, inside the function and as its gradient
            return adopt(x.detach().requires_grad_(True)), "ndarray", False
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
    if kind == "ndarray":
        return adopt(g.detach())
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
        value = out if nested else _detached(out)
        if has_aux:
            if not nested:  # as the value: the auxiliary outputs do not hold the function's graph (torch.func's)
                leaves: list = []
                spec = _flatten(aux, leaves)
                aux = _unflatten(spec, iter(_detached(x) if isinstance(x, Tensor) else x for x in leaves))
            return (value, aux), result
        return value, result

    return wrapped


def _detached(t: Tensor) -> Tensor:
    """t cut from its graph, an ember.numpy array staying one."""
    return adopt(t.detach()) if _is_ndarray(t) else t.detach()


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


# --- HIPS autograd's transforms, on one core: vector-Jacobian products of an argument --------------------------
def _check_argnum(argnum, args) -> None:
    if not isinstance(argnum, int) or not -len(args) <= argnum < len(args):
        raise TypeError(f"argnum {argnum!r} but the function was called with {len(args)} positional arguments")


class _Linearized:
    """fun evaluated at args with argument `argnum` made differentiable: its value and its VJP.

    The argument may be a nested list/tuple/dict (HIPS autograd's containers); so may the value.
    """

    def __init__(self, fun, args, kwargs, argnum) -> None:
        args = list(args)
        _check_argnum(argnum, args)
        leaves: list = []
        self.spec = _flatten(args[argnum], leaves)
        self.prepared = [_as_input(x) if _is_numeric(x) else (x, "static", False) for x in leaves]
        args[argnum] = _unflatten(self.spec, iter(p[0] for p in self.prepared))
        self.nested = any(p[2] for p in self.prepared) or (_DEPTH[0] > 0 and is_grad_enabled())
        _DEPTH[0] += 1
        try:
            with enable_grad():
                out = fun(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
        self.out_leaves: list = []
        self.out_spec = _flatten(out, self.out_leaves)
        self.inputs = [p[0] for p in self.prepared if p[1] != "static"]

    def vjp_tensors(self, cotangents: list, create_graph: bool = False) -> list:
        """The gradient tensor of each differentiable input leaf for one cotangent per output leaf."""
        pairs = [(o, c) for o, c in zip(self.out_leaves, cotangents)
                 if isinstance(o, Tensor) and o.requires_grad and c is not None]
        if not pairs or not self.inputs:
            return [t.detach() * 0.0 for t in self.inputs]
        grads = autograd.grad([o for o, _ in pairs], self.inputs, [c for _, c in pairs], retain_graph=True,
                              create_graph=create_graph or self.nested, allow_unused=True)
        return [g if g is not None else t.detach() * 0.0 for g, t in zip(grads, self.inputs)]

    def give_back(self, grads: list):
        """Gradient tensors, one per differentiable leaf, in the argument's own structure and kinds."""
        it = iter(grads)
        leaves = [p[0] if p[1] == "static" else _give_back(next(it), p[1], self.nested) for p in self.prepared]
        return _unflatten(self.spec, iter(leaves))

    def value(self):
        """fun's value, detached unless inside another differentiation (ember.numpy arrays stay so)."""
        def back(o):
            if not isinstance(o, Tensor) or self.nested:
                return o
            return adopt(o.detach()) if _is_ndarray(o) else o.detach()

        return _unflatten(self.out_spec, iter(back(o) for o in self.out_leaves))

    def cotangents(self, g) -> list:
        """g (structured as fun's value; arrays, numbers or tensors) as one tensor per output leaf."""
        from ember.creation import tensor

        leaves: list = []
        _flatten(g, leaves)
        if len(leaves) != len(self.out_leaves):
            raise ValueError(f"vjp: the cotangent has {len(leaves)} parts but the function's value has "
                             f"{len(self.out_leaves)}")
        out = []
        for c, o in zip(leaves, self.out_leaves):
            if not isinstance(o, Tensor):
                out.append(None)
                continue
            if not isinstance(c, Tensor):
                c = tensor(np.asarray(c, dtype=o._data.dtype), device=o.device)
            if tuple(c.shape) != tuple(o.shape):
                from ember.ops.shape import broadcast_to

                c = broadcast_to(c, tuple(o.shape))
            out.append(c)
        return out


def _tangents(lin: _Linearized, v) -> list:
    """v (structured as the argument; arrays, numbers or tensors) as one tensor per differentiable input leaf."""
    from ember.creation import tensor

    leaves: list = []
    _flatten(v, leaves)
    if len(leaves) != len(lin.prepared):
        raise ValueError(f"jvp: the tangent has {len(leaves)} parts but the argument has {len(lin.prepared)}")
    out = []
    for t, (x, kind, _) in zip(leaves, lin.prepared):
        if kind == "static":
            continue
        out.append(t if isinstance(t, Tensor) else tensor(np.asarray(t, dtype=x._data.dtype), device=x.device))
    return out


def make_vjp(fun, argnum: int = 0):
    """fun -> a function of fun's arguments returning (vjp, value), where vjp(g) is g times the Jacobian of fun
    with respect to argument `argnum` (HIPS autograd's make_vjp). vjp may be called many times."""

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        lin = _Linearized(fun, args, kwargs, argnum)

        def vjp(g):
            return lin.give_back(lin.vjp_tensors(lin.cotangents(g)))

        return vjp, lin.value()

    return wrapped


def make_jvp(fun, argnum: int = 0):
    """fun -> a function of fun's arguments returning jvp, where jvp(v) = (value, J v): the Jacobian of fun
    with respect to argument `argnum` times v (forward mode, computed as the VJP of a VJP, which is linear)."""

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        lin = _Linearized(fun, args, kwargs, argnum)

        def jvp(v):
            from ember.ops import zeros_like

            dummies = [zeros_like(o).requires_grad_(True) if isinstance(o, Tensor) and o.requires_grad else None
                       for o in lin.out_leaves]
            with enable_grad():
                grads = lin.vjp_tensors(dummies, create_graph=True)
            tangents = _tangents(lin, v)
            live = [(g, t) for g, t in zip(grads, tangents) if g.requires_grad]
            used = [d for d in dummies if d is not None]
            if live and used:
                outs = autograd.grad([g for g, _ in live], used, [t for _, t in live], allow_unused=True,
                                     create_graph=lin.nested)
            else:
                outs = [None] * len(used)
            it = iter(outs)
            results = []
            for o, d in zip(lin.out_leaves, dummies):
                if d is None:
                    results.append(o.detach() * 0.0 if isinstance(o, Tensor) else 0.0)
                else:
                    r = next(it)
                    results.append(d.detach() if r is None else r)
            back = [(_give_kind(r, o, lin.nested)) for r, o in zip(results, lin.out_leaves)]
            return lin.value(), _unflatten(lin.out_spec, iter(back))

        return jvp

    return wrapped


def _give_kind(t, like, nested: bool):
    """A result tensor given back as the value `like` was: tensor, ember.numpy array."""
    if nested or not isinstance(t, Tensor):
        return t
    return adopt(t.detach()) if _is_ndarray(like) or not isinstance(like, Tensor) else t.detach()




def elementwise_grad(fun, argnum: int = 0):
    """fun -> the sum of the Jacobian's rows (the VJP with ones): the derivative of an elementwise function."""

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        lin = _Linearized(fun, args, kwargs, argnum)
        ones = [None if not isinstance(o, Tensor) else _ones_like(o) for o in lin.out_leaves]
        return lin.give_back(lin.vjp_tensors(ones))

    return wrapped


def _ones_like(t):
    from ember.ops import ones_like

    return ones_like(t)


def jacobian(fun, argnum: int = 0):
    """fun -> its Jacobian with respect to argument `argnum` (an array or a number), of shape
    value.shape + argument.shape: one backward pass per element of the value."""

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        from ember.ops import reshape, stack, zeros_like

        lin = _Linearized(fun, args, kwargs, argnum)
        if len(lin.out_leaves) != 1 or len(lin.inputs) != 1 or lin.spec is not None:
            raise TypeError("jacobian: the argument and the value must each be one array or number "
                            "(use make_vjp for containers)")
        out, x = lin.out_leaves[0], lin.inputs[0]
        if not isinstance(out, Tensor):
            raise TypeError(f"jacobian: the function must return an array or tensor, got {type(out).__name__}")
        rows = []
        seed = zeros_like(out).reshape(-1)
        for i in range(out.numel()):
            basis = seed.detach().clone()
            basis[i] = 1.0
            rows.append(lin.vjp_tensors([reshape(basis, tuple(out.shape))])[0])
        jac = reshape(stack(rows), tuple(out.shape) + tuple(x.shape)) if rows else \
            reshape(x.detach()[None] * 0.0, (0,) + tuple(x.shape))
        return _give_back(jac, lin.prepared[0][1], lin.nested) if lin.prepared[0][1] != "scalar" else \
            _give_back_array(jac, lin.nested)

    return wrapped


def _give_back_array(t, nested: bool):
    """A Jacobian for a number argument: a NumPy array (a number when the value is one too), as autograd."""
    if nested:
        return t
    arr = t.detach().numpy()
    return arr.item() if arr.ndim == 0 else arr


def hessian(fun, argnum: int = 0):
    """fun -> its Hessian with respect to argument `argnum`: the Jacobian of its Jacobian."""
    return jacobian(jacobian(fun, argnum), argnum)


def hessian_tensor_product(fun, argnum: int = 0):
    """fun -> a function of (*args, tensor) returning the Hessian (w.r.t. argument `argnum`) times tensor."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        import ember.numpy as enp

        args, vector = args[:-1], args[-1]
        return enp.tensordot(fun_grad(*args, **kwargs), vector, enp.ndim(vector))

    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum: int = 0):
    """fun -> a function of (*args, tensor) returning tensor times the Jacobian (w.r.t. argument `argnum`)."""

    def vector_dot_fun(*args, **kwargs):
        import ember.numpy as enp

        args, vector = args[:-1], args[-1]
        return enp.tensordot(vector, fun(*args, **kwargs), axes=enp.ndim(vector))

    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product
