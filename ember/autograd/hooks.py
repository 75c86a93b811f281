"""Tensor hooks of the autograd engine, and `RemovableHandle`, what registering any hook returns.

`Tensor.register_hook(hook)` (PyTorch's): when backward has the whole gradient of the tensor, it calls `hook(grad)`,
which may return a replacement; for a leaf, before the gradient is accumulated into `.grad`, for a non-leaf before it
flows on into the node that made the tensor (and before retain_grad stores it), and for either before `autograd.grad`
returns it. A non-leaf's hooks are kept per node and output (`_node_hooks`), and the node's `retained` field, which
the engine checks anyway, is made non-None so that the engine looks for them.

`Tensor.register_post_accumulate_grad_hook(hook)` (PyTorch's name and semantics): after a backward
pass has accumulated a leaf's gradient into `.grad`, the engine calls `hook(leaf)`. A leaf's
gradient is accumulated as soon as every edge into it is done, not at the end of the pass, so a
hook may start work on it (DDP starts an allreduce) while the rest of the pass runs.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict


class RemovableHandle:
    """A handle that removes one hook from the dicts it was registered in (also a context manager)."""

    _next_id = 0

    def __init__(self, hooks_dict: dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        extras = [] if extra_dict is None else (extra_dict if isinstance(extra_dict, list) else [extra_dict])
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_post_accumulate_grad_hook(tensor, hook) -> RemovableHandle:
    """Call `hook(tensor)` after each backward pass has accumulated the leaf `tensor`'s gradient."""
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}")
    if not tensor._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    hooks = tensor._post_accumulate_grad_hooks
    if hooks is None:
        hooks = tensor._post_accumulate_grad_hooks = OrderedDict()  # weakly referenced by the handle
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def run_post_accumulate_grad_hooks(leaf) -> None:
    """Call the leaf's post-accumulate hooks in registration order (the engine calls this)."""
    for hook in list(leaf._post_accumulate_grad_hooks.values()):
        out = hook(leaf)
        if out is not None:  # PyTorch refuses a result too: the hook acts on the tensor, it replaces nothing
            raise RuntimeError(f"Tensor post accumulate grad hooks should return None (a hook returned {type(out).__name__})")


_node_hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> {output nr: OrderedDict of hooks}


def register_tensor_hook(tensor, node, hook) -> RemovableHandle:
    """Call `hook(grad)` on `tensor`'s gradient in each backward (`node`: the tensor's grad_fn, None for a leaf)."""
    if not callable(hook):
        raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
    if not tensor._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if node is None:
        hooks = tensor._backward_hooks
        if hooks is None:
            hooks = tensor._backward_hooks = OrderedDict()
    else:
        hooks = _node_hooks.setdefault(node, {}).setdefault(tensor._output_nr, OrderedDict())
        if node.retained is None:
            node.retained = {}  # the engine looks at a node's hooks where this is set
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _applied(hooks: OrderedDict, g):
    for hook in list(hooks.values()):
        out = hook(g)
        if out is not None:
            if tuple(out.shape) != tuple(g.shape):
                name = getattr(hook, "__name__", type(hook).__name__)
                raise RuntimeError(f"hook '{name}' has changed the size of value: from {tuple(g.shape)} to "
                                   f"{tuple(out.shape)}")
            g = out
    return g


def run_node_hooks(node, grads: list) -> list:
    """The gradients of a node's outputs after their tensors' hooks (the engine calls this)."""
    per_output = _node_hooks.get(node)
    if not per_output:
        return grads
    grads = list(grads)
    for nr, hooks in per_output.items():
        if hooks and grads[nr] is not None:
            grads[nr] = _applied(hooks, grads[nr])
    return grads


def run_leaf_hooks(leaf, g):
    """A leaf's gradient after its hooks (the engine calls this before accumulating or returning it)."""
    hooks = leaf._backward_hooks
    return _applied(hooks, g) if hooks else g
