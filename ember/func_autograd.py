"""PyTorch's `torch.autograd.functional`: jacobian, hessian, vjp, jvp, hvp and vhp of a function of a tensor (or a
tuple of tensors), built on the transforms of `ember.func_transforms` (reverse-mode products; jvp as the VJP of a
VJP). `ember.autograd.functional` re-exports them, where PyTorch's users look, loaded on first use.
"""

from __future__ import annotations

from ember.func_transforms import jacrev
from ember.func_transforms import jvp as _jvp
from ember.func_transforms import vjp as _vjp
from ember.tensor import Tensor


def _as_tuple(inputs, name: str) -> tuple:
    single = isinstance(inputs, Tensor)
    inputs = (inputs,) if single else tuple(inputs)
    for k, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: The inputs given to {name} must be either a Tensor or a tuple of Tensors but "
                            f"the value at index {k} has type {type(x).__name__}.")
    return inputs, single


def _detached(x, keep: bool):
    if keep:
        return x
    if isinstance(x, tuple):
        return tuple(_detached(t, keep) for t in x)
    return x.detach() if isinstance(x, Tensor) else x


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of func at inputs: a tensor for one input and one output, else tuples (per output, per input)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f'jacobian: expected strategy to be either "forward-mode" or "reverse-mode", got {strategy!r}')
    inputs, single = _as_tuple(inputs, "jacobian")
    argnums = 0 if single else tuple(range(len(inputs)))
    jac = jacrev(func, argnums)(*inputs)
    return _detached(jac, create_graph)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar func at inputs: a tensor for one input, else a tuple of tuples (one block per pair)."""
    inputs, single = _as_tuple(inputs, "hessian")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: The function given to hessian should return a single Tensor with a single "
                               "element")
        return jacrev(func, 0 if single else tuple(range(len(xs))))(*xs)

    argnums = 0 if single else tuple(range(len(inputs)))
    hess = jacrev(lambda *xs: _reshaped_like(gradient(*xs), xs), argnums)(*inputs)
    return _detached(hess, create_graph)


def _reshaped_like(grads, xs: tuple):
    """A scalar's Jacobian (shape () + x.shape per input) as the gradient itself (x.shape)."""
    if isinstance(grads, tuple):
        return tuple(g.reshape(tuple(x.shape)) for g, x in zip(grads, xs))
    return grads.reshape(tuple(xs[0].shape))


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product, in the structure of inputs."""
    inputs, single = _as_tuple(inputs, "vjp")
    output, vjp_fn = _vjp(func, *inputs)
    if v is None:
        if not isinstance(output, Tensor) or output.numel() != 1:
            raise RuntimeError("vjp: The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        from ember.ops import ones_like

        v = ones_like(output)
    grads = vjp_fn(v, create_graph=create_graph)
    return _detached(output, create_graph), _detached(grads[0] if single else grads, create_graph)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, in the structure of func's output."""
    inputs, single = _as_tuple(inputs, "jvp")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("jvp: The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        from ember.ops import ones_like

        v = ones_like(inputs[0])
    tangents, _ = _as_tuple(v, "jvp")
    output, jv = _jvp(func, inputs, tangents)
    return output, jv


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar func: the VJP of its gradient."""
    inputs, single = _as_tuple(inputs, "vhp")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("vhp: The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        v = _ones(inputs[0])
    vs, _ = _as_tuple(v, "vhp")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("vhp: The function given to hvp/vhp should return a single Tensor with a single element")
        return _vjp(func, *xs)[1](_ones(out))

    _, vjp_fn = _vjp(gradient, *inputs)
    grads = vjp_fn(vs, create_graph=create_graph)
    value = func(*inputs)
    return _detached(value, create_graph), _detached(grads[0] if single else grads, create_graph)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar func (the Hessian is symmetric: vhp's values)."""
    return vhp(func, inputs, v, create_graph, strict)


def _ones(t: Tensor) -> Tensor:
    from ember.ops import ones_like

    return ones_like(t)
