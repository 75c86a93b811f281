"""`torch.func`'s other transforms for Ember: vmap, jacrev, jacfwd, hessian, vjp, jvp and stack_module_state.

`vmap` runs the function once per index of the mapped dimension and stacks the results: PyTorch's values and
semantics (in_dims, out_dims, nested inputs and outputs, randomness, chunk_size), not its speed, since Ember has no
batching rules; a batch of B costs B calls. The Jacobians are built from reverse-mode products one output element
at a time (jacfwd too: Ember has no forward mode; the values are the same), `jvp` as the VJP of a VJP.
"""

from __future__ import annotations

import functools

from ember import autograd
from ember.autograd.grad_mode import enable_grad
from ember.interpreter import Interpreter
from ember.ops import stack, zeros_like
from ember.tensor import Tensor
from ember.transforms import _flatten, _unflatten


def _leaves(x) -> tuple:
    leaves: list = []
    spec = _flatten(x, leaves)
    return leaves, spec


# ----------------------------------------------------------------------------------------------------------- vmap

class _NoRandomness(Interpreter):
    """Refuses random draws, as ops (stateful ones) or from ember.creation (randomness='error', vmap's default)."""

    def run(self, op, inputs, arrays, attrs, device):
        if getattr(op, "stateful", False):
            _refuse(op.name)
        return self.below.run(op, inputs, arrays, attrs, device)

    def check_random(self) -> None:
        _refuse("a random draw")


def _refuse(what: str):
    raise RuntimeError(f"vmap: called random operation ({what}) while in randomness error mode. Please either use the "
                       "'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap")


def _dims_per_leaf(in_dims, args: tuple) -> list:
    """One mapped dim (or None) for each leaf of args, from in_dims (an int, None, or a structure like args')."""
    if in_dims is None or isinstance(in_dims, int):
        return [in_dims] * len(_leaves(args)[0])
    if not isinstance(in_dims, tuple) or len(in_dims) != len(args):
        raise ValueError(f"vmap: in_dims is not compatible with the structure of the inputs: expected an int, None or "
                         f"a tuple of {len(args)} entries (one per positional argument), got {in_dims!r}")
    dims: list = []
    for k, (d, a) in enumerate(zip(in_dims, args)):
        n = len(_leaves(a)[0])
        if d is None or isinstance(d, int):
            dims += [d] * n
            continue
        sub, _ = _leaves(d)
        if len(sub) != n:
            raise ValueError(f"vmap: in_dims[{k}] is not compatible with the structure of argument {k}")
        dims += sub
    return dims


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """func mapped over a dimension of its inputs (torch.func.vmap): the results of each index stacked at
    out_dims."""
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        leaves, spec = _leaves(args)
        dims = _dims_per_leaf(in_dims, args)
        size = _mapped_size(leaves, dims)
        if randomness == "same":
            from ember.random import get_rng_state, set_rng_state

            state = get_rng_state()
        results = []
        for i in range(size):
            picked = [x if d is None else x.select(d, i) for x, d in zip(leaves, dims)]
            if randomness == "same":
                set_rng_state(state)
            call_args = _unflatten(spec, iter(picked))
            if randomness == "error":
                with _NoRandomness():
                    results.append(func(*call_args, **kwargs))
            else:
                results.append(func(*call_args, **kwargs))
        return _stacked(results, out_dims)

    return wrapped


def _mapped_size(leaves: list, dims: list) -> int:
    sizes = []
    for k, (x, d) in enumerate(zip(leaves, dims)):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap: got in_dim={d} for input {k}, but input {k} is not a tensor (got "
                             f"{type(x).__name__}); use None as its in_dim")
        if not -x.ndim <= d < x.ndim:
            raise ValueError(f"vmap: got in_dim={d} for an input but the input is of type Tensor with shape "
                             f"{tuple(x.shape)}: in_dim must be in [-{x.ndim}, {x.ndim})")
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError("vmap: at least one input must be mapped over (got in_dims all None)")
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {sizes} "
                         "for the mapped dimension")
    return sizes[0]


def _stacked(results: list, out_dims):
    """The per-index results (each of one structure) stacked at out_dims (an int, or one per output leaf)."""
    first, spec = _leaves(results[0])
    per_index = [_leaves(r)[0] for r in results]
    dims = [out_dims] * len(first) if isinstance(out_dims, int) or out_dims is None else _leaves(out_dims)[0]
    if len(dims) != len(first):
        raise ValueError(f"vmap: out_dims is not compatible with the structure of the outputs ({len(first)} outputs)")
    stacked = []
    for k, d in enumerate(dims):
        column = [leaves[k] for leaves in per_index]
        if not isinstance(column[0], Tensor):
            raise ValueError(f"vmap: the function must return tensors, got {type(column[0]).__name__} for output {k}")
        if d is None:
            stacked.append(column[0])
            continue
        nd = column[0].ndim + 1
        if not -nd <= d < nd:
            raise ValueError(f"vmap: out_dims {d} is out of range for an output of {nd - 1} dims")
        stacked.append(stack(column, d))
    return _unflatten(spec, iter(stacked))


# ------------------------------------------------------------------------------------------------------ Jacobians

def _argnums_tuple(argnums, n: int, name: str) -> tuple:
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise ValueError(f"{name}: argnums {argnums!r} is out of range for {n} positional arguments")
    return nums


def _differentiable(x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"expected tensors to differentiate with respect to, got {type(x).__name__}")
    return x.detach().requires_grad_(True) if not x.requires_grad else x


def _jacobian(outputs: list, inputs: list, create_graph: bool) -> list:
    """[[d out / d in of shape out.shape + in.shape for each input] for each output], one VJP per output element."""
    rows = []
    for out in outputs:
        blocks = [[] for _ in inputs]
        flat = out.reshape(-1)
        for i in range(flat.shape[0]):
            basis = zeros_like(flat)
            basis[i] = 1.0
            grads = autograd.grad(flat, inputs, basis, retain_graph=True, create_graph=create_graph,
                                  allow_unused=True) if out.requires_grad else [None] * len(inputs)
            for b, g, x in zip(blocks, grads, inputs):
                b.append(zeros_like(x) if g is None else g)
        rows.append([stack(b, 0).reshape(tuple(out.shape) + tuple(x.shape)) if b
                     else x.new_zeros(tuple(out.shape) + tuple(x.shape)) for b, x in zip(blocks, inputs)])
    return rows


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """func -> its Jacobian with respect to the arguments at argnums (torch.func.jacrev): for a tensor output and one
    argnum a tensor of shape out.shape + arg.shape; tuples where func returns several outputs or argnums is one."""

    @functools.wraps(func)
    def wrapped(*args):
        nums = _argnums_tuple(argnums, len(args), "jacrev")
        args = list(args)
        nested = autograd.is_grad_enabled() and any(isinstance(args[a], Tensor) and args[a].requires_grad
                                                    for a in nums)
        for a in nums:
            args[a] = _differentiable(args[a])
        with enable_grad():
            result = func(*args)
        aux = None
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise TypeError("jacrev: has_aux=True needs the function to return (output, aux)")
            result, aux = result
        outs, spec = _leaves(result)
        rows = _jacobian(outs, [args[a] for a in nums], create_graph=nested)  # a graph only for an outer derivative
        if not nested:
            rows = [[j.detach() for j in row] for row in rows]
        per_output = [row if isinstance(argnums, tuple) else row[0] for row in rows]
        if isinstance(per_output[0], list):
            per_output = [tuple(r) for r in per_output]
        jac = _unflatten(spec, iter(per_output))
        return (jac, aux) if has_aux else jac

    return wrapped


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """torch.func.jacfwd's Jacobian (the same values, computed in reverse mode: Ember has no forward mode)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """func -> the Jacobian of its Jacobian with respect to the arguments at argnums (torch.func.hessian)."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------------------------------------------- vjp and jvp

def vjp(func, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn) where vjp_fn(cotangents) gives one gradient per primal (torch.func.vjp)."""
    inputs = [_differentiable(p) for p in primals]
    with enable_grad():
        result = func(*inputs)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError("vjp: has_aux=True needs the function to return (output, aux)")
        result, aux = result
    outs, spec = _leaves(result)

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        given, _ = _leaves(cotangents)
        if len(given) != len(outs):
            raise ValueError(f"vjp: expected {len(outs)} cotangents (one per output), got {len(given)}")
        for o, c in zip(outs, given):
            if tuple(c.shape) != tuple(o.shape):
                raise ValueError(f"vjp: a cotangent of shape {tuple(c.shape)} for an output of shape {tuple(o.shape)}")
        live = [(o, c) for o, c in zip(outs, given) if o.requires_grad]
        build = autograd.is_grad_enabled() if create_graph is None else create_graph
        if not live:
            return tuple(zeros_like(x) for x in inputs)
        grads = autograd.grad([o for o, _ in live], inputs, [c for _, c in live], retain_graph=retain_graph,
                              create_graph=build, allow_unused=True)
        return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, inputs))

    value = _unflatten(spec, iter(o.detach() for o in outs))
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jvp(func, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), J tangents) (torch.func.jvp), as the VJP of a VJP: the first is linear in its cotangents."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple) or len(primals) != len(tangents):
        raise ValueError("jvp: primals and tangents must be tuples of the same length")
    for p, t in zip(primals, tangents):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"jvp: a tangent of shape {tuple(t.shape)} for a primal of shape {tuple(p.shape)}")
    out = vjp(func, *primals, has_aux=has_aux)
    value, vjp_fn = out[0], out[1]
    outs, spec = _leaves(value)
    dummies = [zeros_like(o).requires_grad_(True) for o in outs]
    with enable_grad():
        grads = vjp_fn(_unflatten(spec, iter(dummies)), create_graph=True)
    live = [(g, t) for g, t in zip(grads, tangents) if g.requires_grad]
    if live:
        parts = autograd.grad([g for g, _ in live], dummies, [t for _, t in live], allow_unused=True)
    else:
        parts = [None] * len(dummies)
    jv = [zeros_like(o) if p is None else p.detach() for p, o in zip(parts, outs)]
    result = (value, _unflatten(spec, iter(jv)))
    return result + (out[2],) if has_aux else result


def stack_module_state(models) -> tuple:
    """(params, buffers): each name's tensors of the models stacked on a new first dim (torch.func.stack_module_state),
    the parameters as new leaves that require grad, for vmap over functional_call."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    kinds = {type(m) for m in models}
    if len(kinds) > 1 or any(m.training != models[0].training for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class and in the same mode "
                           "(train or eval)")
    params = {name: stack([dict(m.named_parameters())[name].detach() for m in models]).requires_grad_(True)
              for name, _ in models[0].named_parameters()}
    buffers = {name: stack([dict(m.named_buffers())[name] for m in models])
               for name, _ in models[0].named_buffers()}
    return params, buffers
