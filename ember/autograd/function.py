"""Custom autograd functions, PyTorch's `torch.autograd.Function`: a forward written with any ops (or none) and a
backward the user writes, recorded as one node of the autograd graph.

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

The forward runs with gradient recording off; `apply` then records one `Node` whose op calls the class's `backward`
(PyTorch's design: the custom node replaces whatever the forward's ops would have recorded). A backward written with
Ember ops is recorded itself under `create_graph=True`, so it can be differentiated again; `once_differentiable`
marks one that cannot. The forward may also be written without `ctx`, with a `setup_context(ctx, inputs, output)`
beside it (PyTorch 2's form).
"""

from __future__ import annotations

import functools
import inspect

from ember.autograd.engine import Node
from ember.autograd.grad_mode import state as _grad_state
from ember.interpreter import current as current_interpreter
from ember.op import OPS, Op
from ember.tensor import _FLOAT_NP, Tensor


class FunctionCtx:
    """What a custom function's forward leaves for its backward: saved tensors, flags and any attribute set on it."""

    def __init__(self, needs_input_grad: tuple) -> None:
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._to_save: tuple = ()
        self._dirty: tuple = ()
        self._non_differentiable: tuple = ()
        self._node = None

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors (or None) for the backward; reading them there checks they were not modified in place."""
        for k, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, but argument {k} is of type "
                                f"{type(t).__name__}")
        self._to_save = tuple(None if t is None else (t, t._version[0]) for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors save_for_backward kept, as they were then."""
        node = self._node
        saved = self._to_save if node is None else node._saved
        if saved is None:
            node._raise_freed()
        if node is not None:
            saved = saved["ctx"]
        for k, entry in enumerate(saved):
            if entry is not None and entry[0]._version[0] != entry[1]:
                t = entry[0]
                raise RuntimeError(
                    f"one of the tensors needed for gradient computation has been modified by an in-place operation: "
                    f"saved tensor {k} of {self._name()}, of shape {tuple(t.shape)}, is at version {t._version[0]}; "
                    f"expected version {entry[1]}. Use .clone() before modifying it in place.")
        return tuple(None if entry is None else entry[0] for entry in saved)

    saved_variables = saved_tensors

    def mark_dirty(self, *tensors) -> None:
        """Say that the forward modified these inputs in place (and returns them)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Say that these outputs have no gradient (indices, masks); their gradients in backward are zeros or None."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward receives zeros (True, the default) or None for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def _name(self) -> str:
        return f"{self._node.op.name}Backward" if self._node is not None else "a custom Function"


class _CustomOp(Op):
    """The op of one custom function call's node: its vjp is the class's backward."""

    def __init__(self, function: type, n_outputs: int, out_meta: list) -> None:
        self.name = function.__name__
        self.function = function
        self.n_outputs = n_outputs
        self.out_meta = out_meta  # (shape, dtype) per output, None for one that is not a tensor

    def vjp(self, node, *grads):
        ctx = node.attrs["ctx"]
        if ctx.materialize_grads:
            grads = self._materialized(grads)
        cls = self.function  # a class may define its rule as vjp, PyTorch's other name for backward
        rule = cls.vjp if _overrides(cls, "vjp") and not _overrides(cls, "backward") else cls.backward
        result = rule(ctx, *grads)
        return self._checked(node, result if isinstance(result, tuple) else (result,))

    def _materialized(self, grads: tuple) -> tuple:
        like = next(g for g in grads if g is not None)  # the engine calls a vjp only when one gradient is given
        full_like = OPS["full_like"]
        from ember.dispatch import apply

        return tuple(g if g is not None or meta is None else apply(full_like, like, value=0, dtype=meta[1],
                                                                   shape=meta[0])
                     for g, meta in zip(grads, self.out_meta))

    def _checked(self, node, grads: tuple) -> tuple:
        """The backward's gradients, one per forward input, each of a tensor input's shape or one it broadcasts to."""
        n = len(node.edges)
        if len(grads) > n and all(g is None for g in grads[n:]):
            grads = grads[:n]
        if len(grads) != n:
            raise RuntimeError(f"function {self.name}Backward returned an incorrect number of gradients (expected {n}, "
                               f"got {len(grads)})")
        for k, (g, meta) in enumerate(zip(grads, node.in_meta)):
            if g is None:
                continue
            if meta is None or not isinstance(g, Tensor):
                what = "a tensor" if isinstance(g, Tensor) else f"a {type(g).__name__}"
                raise RuntimeError(f"function {self.name}Backward returned {what} as the gradient at position {k}, "
                                   "but " + ("the corresponding forward input was not a tensor" if meta is None
                                             else "a gradient must be a tensor or None"))
            if not _expandable(meta[0], tuple(g.shape)):
                raise RuntimeError(f"function {self.name}Backward returned an invalid gradient at index {k} - got "
                                   f"{list(g.shape)} but expected shape compatible with {list(meta[0])}")
        return grads


def _expandable(shape: tuple, to: tuple) -> bool:
    """Whether `shape` broadcasts to `to` (a gradient of that shape sums back to it)."""
    if len(shape) > len(to):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(to)))


class _OnceDifferentiatedOp(Op):
    """Stands for a once_differentiable backward in the graph that create_graph builds: differentiating it is an
    error rather than a silent zero."""

    name = "once_differentiable"

    def __init__(self, function_name: str, n_outputs: int) -> None:
        self.function_name = function_name
        self.n_outputs = n_outputs

    def vjp(self, node, *grads):
        raise RuntimeError(f"trying to differentiate twice a function that was marked with @once_differentiable "
                           f"({self.function_name}.backward)")


def once_differentiable(backward):
    """Mark a custom function's backward as not differentiable itself (it may use NumPy on the tensors' data):
    it runs with recording off, and differentiating its result again raises."""

    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        recording = _grad_state.enabled
        _grad_state.enabled = False
        try:
            result = backward(ctx, *grads)
        finally:
            _grad_state.enabled = recording
        if not recording or not any(isinstance(g, Tensor) and g._requires_grad for g in grads):
            return result
        outputs = result if isinstance(result, tuple) else (result,)
        tensors = tuple(t for t in outputs if isinstance(t, Tensor))
        node = Node(_OnceDifferentiatedOp(ctx._name(), len(tensors)), {}, tuple(grads), ())
        for nr, t in enumerate(tensors):
            if t._data.dtype in _FLOAT_NP:
                t._requires_grad, t._grad_fn, t._output_nr = True, node, nr
        return result

    return wrapped


class Function:
    """Base class of custom autograd functions (PyTorch's `torch.autograd.Function`): define static `forward` and
    `backward` methods and call the class's `apply`."""

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-style "
                           f"autograd function with static forward method: {type(self).__name__}.apply(...)")

    @staticmethod
    def forward(*args, **kwargs):
        """The function's value; with ctx first unless the class defines setup_context."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save what backward needs, for a forward written without ctx."""
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """The gradients of the forward's inputs (None for those without one) from its outputs'."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vjp(ctx, *grad_outputs):
        """Another name for backward."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on the arguments and record one node whose gradient is backward."""
        separate = _overrides(cls, "setup_context")
        if separate:  # every argument bound to its position, defaults too, as PyTorch does: setup_context sees them
            args, kwargs = _positional(cls, args, kwargs), {}
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = FunctionCtx(needs)
        recording = _grad_state.enabled
        _grad_state.enabled = False
        try:
            if separate:
                output = cls.forward(*args)
                cls.setup_context(ctx, args, output)
            else:  # keyword arguments go to forward as they are, and get no gradient
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            _grad_state.enabled = recording
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        if not (recording and any(needs)):
            return output
        differentiable = tuple(not any(o is t for t in ctx._non_differentiable) for o in outputs)
        outputs = _own_outputs(cls, args, outputs, ctx)
        _record(cls, ctx, args, outputs, differentiable)
        return outputs[0] if single else outputs


def _overrides(cls: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(Function, name)


def _positional(cls: type, args: tuple, kwargs: dict) -> tuple:
    """args and kwargs as forward's positional arguments (a forward written without ctx), defaults filled in."""
    params = list(inspect.signature(cls.forward).parameters.values())
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{cls.__name__}.apply: {e}") from None
    bound.apply_defaults()
    return tuple(bound.arguments[p.name] for p in params if p.name in bound.arguments)


def _own_outputs(cls: type, args: tuple, outputs: tuple, ctx: FunctionCtx) -> tuple:
    """The outputs as tensors this call's node may own: an input returned as it is becomes an alias of it (a dirty
    one, modified in place, stays itself), and a view of an input a copy, so that no other history owns them."""
    owned = []
    for out in outputs:
        if not isinstance(out, Tensor):
            owned.append(out)
        elif any(out is d for d in ctx._dirty):
            if out._base is not None:
                raise RuntimeError(f"{cls.__name__}.apply: an input modified in place (mark_dirty) that is a view is "
                                   "not supported; clone it before the call")
            if out._requires_grad and out._grad_fn is None:
                raise RuntimeError(f"{cls.__name__}.apply: a leaf tensor that requires grad is being used in an "
                                   "in-place operation (mark_dirty)")
            out._version[0] += 1
            owned.append(out)
        elif any(out is a for a in args):
            alias = Tensor._make(out._data, out._device)
            alias._version = out._version
            owned.append(alias)
        elif out._base is not None and any(isinstance(a, Tensor) and _shares(out, a) for a in args):
            owned.append(out.clone())
        else:
            owned.append(out)
    return tuple(owned)


def _shares(view: Tensor, t: Tensor) -> bool:
    """Whether `view` is a view of t's storage."""
    return view._base is t or view._base is t._base


def _record(cls: type, ctx: FunctionCtx, args: tuple, outputs: tuple, differentiable: tuple) -> None:
    """One node for the call: its edges from the inputs, the differentiable tensor outputs pointing at it."""
    out_meta = [(tuple(o.shape), o._data.dtype) if isinstance(o, Tensor) else None for o in outputs]
    op = _CustomOp(cls, len(outputs), out_meta)
    node = Node(op, {"ctx": ctx}, args, ())
    node._saved = {"ctx": ctx._to_save}  # freed with the node after a backward that does not retain the graph
    ctx._to_save = ()
    ctx._node = node
    top = current_interpreter()
    if top.sees_nodes:  # anomaly mode keeps the forward call's stack
        top.recorded(node)
    for nr, (out, wanted) in enumerate(zip(outputs, differentiable)):
        if wanted and isinstance(out, Tensor) and out._data.dtype in _FLOAT_NP:
            out._requires_grad, out._grad_fn, out._output_nr = True, node, nr
