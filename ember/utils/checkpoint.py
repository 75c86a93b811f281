"""Rematerialisation at the autograd level: `checkpoint(fn, *args)` recomputes fn in the backward pass.

The forward pass keeps only fn's inputs and outputs, not the tensors its ops would save; the
backward pass runs fn again with gradients enabled and backpropagates through that recomputation
(PyTorch's `torch.utils.checkpoint`). It is one op, `checkpoint`, whose gradient rule recomputes,
so it works eagerly, on symbolic tensors and inside `ember.jit` (where the forward is one graph node
and the recomputation becomes part of the backward graph).

Tensors fn reads from outside (parameters, buffers) are found by recording fn once and become
extra inputs of the op, so they get gradients too. Everything else fn depends on must be passed as
an argument. The random-number state is restored for the recomputation, so dropout masks match.
"""

from __future__ import annotations

from ember import dispatch
from ember import random as _random
from ember.autograd.engine import Node, record, walk
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.autograd.grad_mode import state as grad_state
from ember.backends.meta import MetaArray
from ember.op import Op, register
from ember.tensor import Tensor


class Checkpoint(Op):
    """fn applied to tensors, recomputed by the gradient rule instead of saving fn's internals."""

    name = "checkpoint"
    save_inputs = slice(None)

    def __init__(self, n_outputs: int = 1) -> None:
        self.n_outputs = n_outputs

    def infer(self, *inputs, fn, n_args, out_specs, device, rng=None):
        return out_specs[0] if self.n_outputs == 1 else tuple(out_specs)

    def kernel(self, xp, *arrays, fn, n_args, out_specs, device, rng=None):
        with no_grad():
            outs = fn(*[Tensor._make(a, device) for a in arrays[:n_args]])
        outs = _as_tuple(outs)
        return outs[0]._data if self.n_outputs == 1 else tuple(o._data for o in outs)

    def vjp(self, ctx, *grads):
        attrs = ctx.attrs
        n_args = attrs["n_args"]
        n_in = len(ctx.edges)
        inputs = [ctx.input(i) for i in range(n_in)]
        detached = []
        for i in range(n_args):
            d = inputs[i].detach()
            if ctx.needs_grad(i):
                d.requires_grad_(True)
            detached.append(d)
        rng = attrs.get("rng")
        saved_rng = _random.get_rng_state() if rng is not None else None
        if rng is not None:
            _random.set_rng_state(rng)
        try:
            with enable_grad():
                outs = _as_tuple(attrs["fn"](*detached))
        finally:
            if saved_rng is not None:
                _random.set_rng_state(saved_rng)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        wanted = [i for i in range(n_in) if ctx.needs_grad(i)]
        result = [None] * n_in
        if not pairs or not wanted:
            return tuple(result)
        from ember.autograd import grad as _grad

        targets = [detached[i] if i < n_args else inputs[i] for i in wanted]
        got = _grad([o for o, _ in pairs], targets, [g for _, g in pairs], allow_unused=True,
                    create_graph=grad_state.enabled)
        for i, g in zip(wanted, got):
            result[i] = g
        return tuple(result)


_OPS = {1: register(Checkpoint(1))}


def _op(n: int) -> Checkpoint:
    op = _OPS.get(n)
    if op is None:
        op = _OPS[n] = Checkpoint(n)
    return op


def _as_tuple(out) -> tuple:
    if isinstance(out, Tensor):
        return (out,)
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, Tensor) for o in out):
        return tuple(out)
    raise TypeError(f"checkpoint: fn must return a tensor or a tuple of tensors, got {type(out).__name__}")


def checkpoint(fn, *args, preserve_rng_state: bool = True, use_reentrant=None):
    """fn(*args), keeping only inputs and outputs for backward: fn is recomputed to get gradients."""
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[i] for i in positions]
    if not tensors:
        return fn(*args)

    def call(*ts):
        full = list(args)
        for i, t in zip(positions, ts):
            full[i] = t
        return fn(*full)

    symbolic = dispatch.current().symbolic or any(dispatch.is_symbolic(t) for t in tensors)
    if not grad_state.enabled:
        return fn(*args)
    rng = _random.get_rng_state() if preserve_rng_state and not symbolic else None
    if symbolic:
        return _symbolic(call, tensors, rng)
    return _eager(call, tensors, rng)


def _eager(call, tensors, rng):
    """Run fn once recording, find the outside leaves, keep only the outputs, record one node."""
    detached = [t.detach().requires_grad_(True) if t._requires_grad else t.detach() for t in tensors]
    with enable_grad():
        outs = _as_tuple(call(*detached))
    params = _outside_leaves(outs, detached)
    results = tuple(o.detach() for o in outs)
    del outs  # fn's recorded graph and the tensors it saved die here
    inputs = tuple(tensors) + tuple(params)
    if not any(t._requires_grad for t in inputs):
        return results[0] if len(results) == 1 else results
    op = _op(len(results))
    attrs = {"fn": call, "n_args": len(tensors), "out_specs": [MetaArray(r.shape, r._data.dtype) for r in results],
             "device": tensors[0]._device, "rng": rng}
    record(op, attrs, inputs, results)
    return results[0] if len(results) == 1 else results


def _symbolic(call, tensors, rng):
    """Inside a graph: one `checkpoint` node (its specs and outside leaves found on a scratch trace)."""
    from ember.graph.ir import Graph
    from ember.graph.trace import Tracer

    scratch = Graph("checkpoint")
    tracer = Tracer(scratch)
    placeholders = []
    for t in tensors:
        s = Tensor._make(scratch.placeholder(tuple(t.shape), t._data.dtype, t._device), t._device)
        if t._requires_grad:
            s.requires_grad_(True)
        placeholders.append(s)
    with tracer, enable_grad():
        outs = _as_tuple(call(*placeholders))
        params = _outside_leaves(outs, placeholders)
        specs = [MetaArray(o._data.shape, o._data.dtype) for o in outs]
    del outs
    op = _op(len(specs))
    res = dispatch.apply(op, *tensors, *params, fn=call, n_args=len(tensors), out_specs=specs,
                         device=tensors[0]._device, rng=rng)
    return res


def _outside_leaves(outs, own) -> list:
    """Leaf tensors requiring grad that the recorded outputs depend on, other than fn's arguments."""
    own_ids = {id(t) for t in own}
    found: dict = {}
    for o in outs:
        if o._grad_fn is None and o._requires_grad and id(o) not in own_ids:
            found[id(o)] = o
    for node in walk([o._grad_fn for o in outs]):
        for edge in node.edges:
            if edge is not None and type(edge[0]) is not Node and id(edge[0]) not in own_ids:
                found[id(edge[0])] = edge[0]
    return list(found.values())


def checkpoint_sequential(functions, segments: int, input, preserve_rng_state: bool = True):
    """Run `functions` (callables or an nn.Sequential) in order, checkpointing `segments` chunks of them."""
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    size = -(-len(fns) // segments)
    x = input
    for start in range(0, len(fns), size):
        chunk = fns[start:start + size]

        def run(t, chunk=chunk):
            for f in chunk:
                t = f(t)
            return t

        x = checkpoint(run, x, preserve_rng_state=preserve_rng_state)
    return x
