"""Views and in-place writes in the autograd graph.

A view shares its source's storage and version counter and remembers how it was made from its base
(`link_view`), so that an in-place write through the view can be replayed into the base's history
(`rebase_view_history` adds a `copy_slices` node) and a view's history can be rebuilt after another
alias wrote to the storage (`current_grad_fn`). Before a tensor is overwritten, nodes that saved it
get a copy of its old values (`protect_saved`); after, its history is rewritten (`rebase_after_write`).
"""

from __future__ import annotations

import numpy as np

from ember.autograd.engine import Node, record, walk
from ember.autograd.grad_mode import state as _grad_state
from ember.backends.meta import MetaArray
from ember.op import Op, register

# The `_view_fn` of the outputs of an op that returns several views (split, unbind): like PyTorch,
# autograd cannot replay a write through one of them, so such a write is an error while it records.
MULTI_OUTPUT_VIEW = "multi-output view"


def link_view(op, out, inputs, attrs) -> None:
    """Make a view share its source's version counter and remember how it was made from its base.

    The version counter lets autograd see writes through any alias; the recorded steps let an
    in-place write through the view be replayed into the base's history (`copy_slices`).
    """
    src = inputs[0]
    if op.is_view == "multi":
        out._version = src._version
        out._base = src._base if src._base is not None else src
        out._view_fn = MULTI_OUTPUT_VIEW
        return
    if op.is_view == "maybe":
        a, b = out._data, src._data
        # NumPy collapses view chains: a view's .base is the array that owns the memory.
        if type(a) is np.ndarray and a.base is not b and (b.base is None or a.base is not b.base):
            return
    out._version = src._version
    if src._base is not None:
        out._base = src._base
        parent = src._view_fn
    else:
        out._base = src
        parent = None
    out._view_fn = (op, attrs, inputs[1:], parent)


def view_chain(t):
    """The (op, attrs, extra inputs) steps that make view `t` from its base, outermost last."""
    steps = []
    fn = t._view_fn
    while fn is not None and fn is not MULTI_OUTPUT_VIEW:
        op, attrs, extra, parent = fn
        steps.append((op, attrs, extra))
        fn = parent
    return tuple(reversed(steps))


def replay_view(base, chain):
    """Apply recorded view steps to another tensor of the base's shape."""
    from ember.dispatch import apply

    out = base
    for op, attrs, extra in chain:
        out = apply(op, out, *extra, **attrs)
    return out


class CopySlicesOp(Op):
    """History of a base tensor after an in-place write through one of its views."""

    name = "copy_slices"

    def infer(self, base, view_value, chain):
        return MetaArray(base.shape, base.dtype)

    def vjp(self, ctx, g):
        from ember.dispatch import apply
        from ember.op import OPS

        chain = ctx.attrs["chain"]
        g_base = apply(OPS["clone"], g)  # the op by name: autograd builds on the op contract, not the op modules
        region = replay_view(g_base, chain)
        g_view = replay_view(g, chain) if ctx.needs_grad(1) else None
        region.zero_() if not region._requires_grad else region.mul_(0.0)
        return g_base, g_view


copy_slices_op = register(CopySlicesOp())


def rebase_view_history(view, result) -> None:
    """After writing `result` into `view` in place, make the base's history include the write."""
    base = view._base
    if view._view_fn is MULTI_OUTPUT_VIEW:
        raise RuntimeError(
            "this tensor is one of the views that split/chunk/unbind returned and is being modified in place; "
            "autograd cannot follow in-place writes to the outputs of a function returning several views: "
            "clone() it first, or write under `with ember.no_grad():`"
        )
    if base._grad_fn is None and base._requires_grad:
        raise RuntimeError(
            "a view of a leaf tensor that requires grad is being used in an in-place operation; "
            "clone the leaf first or wrap the write in `with ember.no_grad():`"
        )
    record(copy_slices_op, {"chain": view_chain(view)}, (base, result), (base,))


def current_grad_fn(t):
    """t's grad_fn, first rebuilt from its base if t is a view whose storage was written since.

    A write through one alias of a storage changes the values every other view of it sees, so a
    view's history must then come from the base's new history (PyTorch regenerates it the same way).
    """
    fn = t._grad_fn
    if fn is None or t._base is None or fn.view_version is None or fn.view_version == t._version[0]:
        return fn
    base = t._base
    prev = _grad_state.enabled
    _grad_state.enabled = True
    try:
        fresh = replay_view(base, view_chain(t))
    finally:
        _grad_state.enabled = prev
    t._grad_fn = fresh._grad_fn
    t._output_nr = fresh._output_nr
    t._requires_grad = fresh._requires_grad
    return t._grad_fn


def _snapshot(x, edge):
    """A copy of x's current values that stands for x in the autograd graph."""
    data = x._data
    # Meta and graph values are never written in place (a write rebinds them), so share them.
    snap = _Tensor._make(data if isinstance(data, MetaArray) else data.copy(), x._device)
    if edge is not None and type(edge[0]) is Node:
        snap._grad_fn, snap._output_nr = edge
        snap._requires_grad = True
    return snap


def protect_saved(t, result, mark: int) -> None:
    """Before t is overwritten with `result`, give the nodes that computed result their own copy of t.

    Those nodes saved t itself (for example `mul` for `t.mul_(w)`) and need its old values; PyTorch
    likewise saves a clone of `self` for in-place ops. Other aliases of t stay shared, so using one
    of them later still raises the version-counter error, as in PyTorch.
    """
    node = result._grad_fn
    if node is None or node.seq <= mark:
        return
    version = t._version[0]
    for n in walk([node], follow=lambda parent: parent.seq > mark):
        saved = n._saved
        if saved:
            for i, (x, v) in saved.items():
                if x is t and v == version:
                    saved[i] = (_snapshot(t, n.edges[i]), 0)


def needs_inplace_record(t, result) -> bool:
    """Whether writing `result` into t must change the autograd graph."""
    if not _grad_state.enabled:
        return False
    if result._requires_grad or t._requires_grad:
        return True
    base = t._base
    return base is not None and t._view_fn is not None and base._requires_grad


def rebase_after_write(t, result) -> None:
    """After `result` was written into t in place, rewrite the autograd history to match."""
    base = t._base
    if base is not None and t._view_fn is not None:
        # The base changed in the view's region: its history gains a copy_slices node, and the
        # view's history is then that region of the base (PyTorch's rule).
        rebase_view_history(t, result)
        fresh = replay_view(base, view_chain(t))
        t._grad_fn = fresh._grad_fn
        t._output_nr = fresh._output_nr
        t._requires_grad = fresh._requires_grad
    elif result._requires_grad:
        node = result._grad_fn
        t._grad_fn = node
        t._output_nr = result._output_nr
        t._requires_grad = True
        # A rule that saved its output (relu_, sigmoid_, exp_) can read t's storage, which now holds
        # the same values: the separate result buffer is then freed (PyTorch saves `self` likewise).
        saved = node._out_saved if node is not None else None
        if saved:
            data = result._data
            for i, (arr, _counter, _version, device) in list(saved.items()):
                if arr is data and t._data.shape == arr.shape and t._data.dtype == arr.dtype:
                    saved[i] = (t._data, t._version, t._version[0], device)
    else:
        # Overwritten with values that do not depend on anything differentiable (fill_, copy_
        # of a constant): the old history gets a zero gradient, as PyTorch's FillBackward.
        record(copy_slices_op, {"chain": ()}, (t, result), (t,))


from ember.tensor import Tensor as _Tensor  # noqa: E402  (the tensor layer imports this module)
