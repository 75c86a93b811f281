"""Reverse-mode automatic differentiation over the recorded op graph.

Every op call that needs gradients records a `Node`: the op, its attributes, edges to the nodes (or
leaf tensors) that produced its inputs, and the tensors its gradient rule needs. `backward` walks
the nodes in reverse topological order and calls each op's `vjp`, which is written in Ember ops,
so with `create_graph=True` the backward pass is itself recorded and can be differentiated again.
"""

from __future__ import annotations

import weakref

from ember.grad_mode import state as _grad_state


class Node:
    """One recorded op application: the autograd graph's unit (`tensor.grad_fn`)."""

    __slots__ = (
        "op", "attrs", "edges", "in_meta", "_saved", "_out_saved", "freed", "retained", "seq", "view_version",
        "__weakref__",
    )

    def __init__(self, op, attrs: dict, inputs: tuple, outputs: tuple) -> None:
        self.op = op
        self.attrs = attrs
        self.freed = False
        self.retained = None
        _SEQ[0] += 1
        self.seq = _SEQ[0]
        # For a view, the version of its storage when this node was made: a later in-place write
        # through another alias makes the node stale (see `current_grad_fn`).
        out0 = outputs[0] if outputs else None
        self.view_version = out0._version[0] if op.is_view and out0 is not None and out0._base is not None else None
        edges = []
        meta = []
        for x in inputs:
            if isinstance(x, _Tensor):
                meta.append((x._data.shape, x._data.dtype))
                if x._requires_grad:
                    fn = x._grad_fn if x._base is None else current_grad_fn(x)
                    edges.append((fn, x._output_nr) if fn is not None else (x, -1))
                    continue
            else:
                meta.append(None)
            edges.append(None)
        self.edges = edges
        self.in_meta = meta
        save = op.save_inputs
        if type(save) is slice:  # ops with a variable number of inputs save a range of them
            save = range(len(inputs))[save]
        if save:
            self._saved = {i: (inputs[i], _version_of(inputs[i])) for i in save}
            for i, (x, _) in self._saved.items():
                if type(x) is _np.ndarray:  # a NumPy operand (ndarray @ tensor): rules need a tensor
                    self._saved[i] = (_Tensor._make(x, outputs[0]._device), None)
        else:
            self._saved = None
        if op.save_outputs:
            self._out_saved = {
                i: (outputs[i]._data, outputs[i]._version, outputs[i]._version[0], outputs[i]._device)
                for i in op.save_outputs
            }
        else:
            self._out_saved = None

    # --- the context interface that gradient rules use ---------------------------------
    @property
    def name(self) -> str:
        return self.op.name

    def input(self, i: int):
        """The i-th input as it was at forward time (an error if it was modified in place since)."""
        if self._saved is None:
            self._raise_freed()
        try:
            x, version = self._saved[i]
        except KeyError:
            raise RuntimeError(f"{self.op.name}: gradient rule asked for input {i}, which it did not save") from None
        if version is not None and x._version[0] != version:
            raise RuntimeError(
                f"one of the tensors needed for gradient computation has been modified by an in-place "
                f"operation: input {i} of {self.op.name}, of shape {tuple(x.shape)}, is at version "
                f"{x._version[0]}; expected version {version}. Use .clone() before modifying it in place."
            )
        return x

    @property
    def output(self):
        """The op's (first) output as a tensor connected to this node."""
        return self.output_at(0)

    def output_at(self, i: int):
        """Output i as saved at forward time (connected to this node when it is a float)."""
        if self._out_saved is None:
            self._raise_freed()
        data, counter, version, device = self._out_saved[i]
        if counter[0] != version:
            raise RuntimeError(
                f"one of the tensors needed for gradient computation has been modified by an in-place "
                f"operation: output {i} of {self.op.name} is at version {counter[0]}; expected version "
                f"{version}. Use .clone() before modifying it in place."
            )
        out = _Tensor._make(data, device)
        out._version = counter
        if data.dtype in _FLOAT_NP:
            out._requires_grad = True
            out._grad_fn = self
            out._output_nr = i
        return out

    def in_shape(self, i: int) -> tuple:
        return tuple(self.in_meta[i][0])

    def in_dtype(self, i: int):
        return self.in_meta[i][1]

    def needs_grad(self, i: int) -> bool:
        """Whether input i needs a gradient (lets rules skip work)."""
        return self.edges[i] is not None

    def _raise_freed(self):
        raise RuntimeError(
            f"trying to backward through the graph a second time (through {self.op.name}): its saved "
            "tensors were freed after the first backward. Pass retain_graph=True to the first "
            "backward() if you need to backward twice."
        )

    def release(self) -> None:
        """Drop saved tensors after a backward pass that does not retain the graph."""
        if self._saved is not None or self._out_saved is not None:
            self._saved = None
            self._out_saved = None
            self.freed = True

    def next_functions(self) -> tuple:
        """Edges to the nodes that produced the inputs (PyTorch's `grad_fn.next_functions`)."""
        return tuple(self.edges)

    def __repr__(self) -> str:
        return f"<{self.op.name}Backward>"


def _version_of(x):
    return x._version[0] if isinstance(x, _Tensor) else None


_SEQ = [0]  # creation counter of nodes: tells the nodes an in-place op made from older ones


def seq_mark() -> int:
    """A mark that every node created from now on is newer than (see `protect_saved`)."""
    return _SEQ[0]


# --- in-place writes and views ---------------------------------------------------------------
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
        fresh = _ops.device_ops.replay_view(base, _ops.device_ops.view_chain(t))
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
    snap = _Tensor._make(data if isinstance(data, _MetaArray) else data.copy(), x._device)
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
    stack, seen = [node], {id(node)}
    while stack:
        n = stack.pop()
        saved = n._saved
        if saved:
            for i, (x, v) in saved.items():
                if x is t and v == version:
                    saved[i] = (_snapshot(t, n.edges[i]), 0)
        for edge in n.edges:
            if edge is not None and type(edge[0]) is Node and edge[0].seq > mark and id(edge[0]) not in seen:
                seen.add(id(edge[0]))
                stack.append(edge[0])


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
        _ops.rebase_view_history(t, result)
        fresh = _ops.device_ops.replay_view(base, _ops.device_ops.view_chain(t))
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
        node = Node(_ops.OPS["copy_slices"], {"chain": ()}, (t, result), (t,))
        t._grad_fn = node
        t._output_nr = 0
        t._requires_grad = True


def _collect(roots: list) -> dict:
    """Count, for each node reachable from the roots, how many edges point at it."""
    deps: dict = {}
    stack = list(roots)
    seen = set(id(n) for n in roots)
    while stack:
        node = stack.pop()
        for edge in node.edges:
            if edge is None:
                continue
            parent = edge[0]
            if type(parent) is not Node:
                continue
            deps[parent] = deps.get(parent, 0) + 1
            if id(parent) not in seen:
                seen.add(id(parent))
                stack.append(parent)
    return deps


def _fit(g, shape, np_dtype, node, i):
    """Reduce a broadcast gradient to the input's shape and cast it to the input's dtype."""
    if g.shape != shape:
        g = _ops.sum_to_size(g, shape)
    if g._data.dtype != np_dtype:
        g = g.to(_dt.from_numpy_dtype(np_dtype))
    return g


def run_backward(
    roots, grads, retain_graph: bool = False, create_graph: bool = False, inputs=None, allow_unused=False
):
    """The engine: propagate `grads` from `roots` back to leaves (or to `inputs`, returned in order)."""
    capture_leaf: dict = {}
    capture_node: dict = {}
    results = None
    if inputs is not None:
        results = [None] * len(inputs)
        for k, x in enumerate(inputs):
            if not isinstance(x, _Tensor):
                raise TypeError(f"grad: inputs must be tensors, got {type(x).__name__}")
            if not x._requires_grad:
                raise RuntimeError(f"grad: input {k} (shape {tuple(x.shape)}) does not require grad")
            fn = current_grad_fn(x)
            if fn is None:
                capture_leaf.setdefault(id(x), []).append(k)
            else:
                capture_node.setdefault((fn, x._output_nr), []).append(k)

    buffers: dict = {}
    leaf_grads: dict = {}  # id(leaf) -> (leaf, grad)
    root_nodes = []

    def send_leaf(leaf, g):
        key = id(leaf)
        prev = leaf_grads.get(key)
        leaf_grads[key] = (leaf, g if prev is None else prev[1] + g)

    prev_mode = _grad_state.enabled
    _grad_state.enabled = create_graph
    try:
        for t, g in zip(roots, grads):
            fn = current_grad_fn(t)
            if fn is None:
                send_leaf(t, g)
                continue
            buf = buffers.setdefault(fn, [None] * fn.op.n_outputs)
            nr = t._output_nr
            buf[nr] = g if buf[nr] is None else buf[nr] + g
            if fn not in root_nodes:
                root_nodes.append(fn)

        deps = _collect(root_nodes)
        ready = [n for n in root_nodes if n not in deps]
        while ready:
            node = ready.pop()
            out_grads = buffers.pop(node)
            if capture_node:
                for nr, g in enumerate(out_grads):
                    for k in capture_node.get((node, nr), ()):
                        results[k] = g
            if node.retained:
                for nr, ref in node.retained.items():
                    t = ref()
                    if t is not None and out_grads[nr] is not None:
                        t.grad = out_grads[nr] if create_graph else out_grads[nr].detach()
            if node.freed:
                node._raise_freed()
            if all(g is None for g in out_grads):
                in_grads = (None,) * len(node.edges)
            else:
                in_grads = node.op.vjp(node, *out_grads)
                if not isinstance(in_grads, (tuple, list)):
                    in_grads = (in_grads,)
            if not retain_graph:
                node.release()
            for i, edge in enumerate(node.edges):
                if edge is None:
                    continue
                parent, nr = edge
                g = in_grads[i] if i < len(in_grads) else None
                if g is not None:
                    shape, np_dtype = node.in_meta[i]
                    g = _fit(g, shape, np_dtype, node, i)
                if type(parent) is Node:
                    if g is not None:
                        buf = buffers.get(parent)
                        if buf is None:
                            buf = buffers[parent] = [None] * parent.op.n_outputs
                        buf[nr] = g if buf[nr] is None else buf[nr] + g
                    elif parent not in buffers:
                        buffers[parent] = [None] * parent.op.n_outputs
                    deps[parent] -= 1
                    if deps[parent] == 0:
                        ready.append(parent)
                elif g is not None:
                    send_leaf(parent, g)
    finally:
        _grad_state.enabled = prev_mode

    if inputs is not None:
        for key, (_leaf, g) in leaf_grads.items():
            for k in capture_leaf.get(key, ()):
                results[k] = g
        for k, r in enumerate(results):
            if r is None and not allow_unused:
                raise RuntimeError(
                    f"grad: input {k} was not used to compute the outputs; pass allow_unused=True "
                    "to get None for it"
                )
            if r is not None and not create_graph:
                results[k] = r.detach()
        return results

    stored = set()
    for leaf, g in leaf_grads.values():
        _accumulate_into_leaf(leaf, g, create_graph, stored)
    return None


def _accumulate_into_leaf(leaf, g, create_graph: bool, stored: set) -> None:
    if not create_graph:
        g = g.detach()
    if leaf.grad is None:
        data = g._data
        # A gradient may alias another leaf's or be a read-only broadcast view: own a copy then.
        flags = getattr(data, "flags", None)
        if flags is not None and (not flags.owndata or not flags.writeable or id(data) in stored):
            g = g.clone() if not create_graph else g
        stored.add(id(g._data))
        leaf.grad = g
    elif create_graph:
        leaf.grad = leaf.grad + g
    elif type(leaf.grad._data) is _np.ndarray and type(g._data) is _np.ndarray:
        leaf.grad._data += g._data.astype(leaf.grad._data.dtype, copy=False)
        leaf.grad._version[0] += 1
    else:  # symbolic or another backend: an ordinary in-place op (graph building records it)
        prev = _grad_state.enabled
        _grad_state.enabled = False
        try:
            leaf.grad.add_(g)
        finally:
            _grad_state.enabled = prev


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False) -> None:
    """Accumulate d(tensors)/d(leaves) into each leaf's `.grad` (PyTorch's `autograd.backward`)."""
    if isinstance(tensors, _Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    if grad_tensors is None or isinstance(grad_tensors, _Tensor):
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    roots, grads = [], []
    for t, g in zip(tensors, grad_tensors):
        if not t._requires_grad:
            raise RuntimeError(
                f"element of shape {tuple(t.shape)} does not require grad and has no grad_fn: call "
                "requires_grad_() on the leaves you want gradients for"
            )
        roots.append(t)
        grads.append(_initial_grad(t, g, "backward"))
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(roots, grads, retain_graph=retain_graph, create_graph=create_graph)


def _initial_grad(t, g, what: str):
    if g is None:
        if t.numel() != 1:
            raise RuntimeError(
                f"{what}: grad can be implicitly created only for scalar outputs, but the output has "
                f"shape {tuple(t.shape)}; pass a gradient of that shape"
            )
        return _ops.ones_like(t)
    if not isinstance(g, _Tensor):
        g = _Tensor._make(t._device.backend.from_host(_np.asarray(g, dtype=t._data.dtype)), t._device)
    if tuple(g.shape) != tuple(t.shape):
        raise ValueError(f"{what}: gradient has shape {tuple(g.shape)} but the output has shape {tuple(t.shape)}")
    if g._device is not t._device:
        raise RuntimeError(f"{what}: gradient is on {g._device} but the output is on {t._device}")
    return g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused=False):
    """d(outputs)/d(inputs) as a tuple, without touching `.grad` (PyTorch's `autograd.grad`)."""
    single_out = isinstance(outputs, _Tensor)
    outputs = [outputs] if single_out else list(outputs)
    inputs_seq = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, _Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    grads = []
    for t, g in zip(outputs, grad_outputs):
        if not t._requires_grad:
            raise RuntimeError(
                f"grad: output of shape {tuple(t.shape)} does not require grad; none of the inputs was "
                "used to compute it with gradients enabled"
            )
        grads.append(_initial_grad(t, g, "grad"))
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(
        outputs, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs_seq,
        allow_unused=allow_unused,
    )
    return tuple(result)


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, raise_exception=True) -> bool:
    """Compare autograd's Jacobians of fn with float64 central finite differences for every input.

    The numeric Jacobian is built a column at a time: each input element is nudged by +eps and -eps
    and fn is evaluated once for each, which gives that element's effect on every output at once.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [x for x in inputs if isinstance(x, _Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad")
    for x in diff:
        if x.dtype is not _dt.float64:
            raise TypeError(f"gradcheck: inputs must be float64 for finite differences, got {x.dtype}")
        x._require_data("gradcheck")
    outs = _as_outputs(fn(*inputs))
    float_outs = [k for k, o in enumerate(outs) if o.is_floating_point()]
    analytic = {k: _analytic_jacobian(outs[k], diff) for k in float_outs}
    numeric = _numeric_jacobian(fn, inputs, diff, {k: outs[k].numel() for k in float_outs}, eps)
    for k in float_outs:
        for xi in range(len(diff)):
            a, n = analytic[k][xi], numeric[k][xi]
            if not _np.allclose(a, n, atol=atol, rtol=rtol):
                if not raise_exception:
                    return False
                j, e = _np.unravel_index(_np.argmax(_np.abs(a - n)), a.shape)
                raise RuntimeError(
                    f"gradcheck: Jacobian of output {k} w.r.t. input {xi} differs from finite differences; "
                    f"largest gap at output element {j}, input element {e}: analytic {a[j, e]:.6g}, "
                    f"numeric {n[j, e]:.6g}\nanalytic:\n{a}\nnumeric:\n{n}"
                )
    return True


def _as_outputs(out) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outs:
        if not isinstance(o, _Tensor):
            raise TypeError(f"gradcheck: the function must return tensors, got {type(o).__name__}")
    return outs


def _analytic_jacobian(out, diff) -> list:
    """Per input, the (out.numel(), x.numel()) Jacobian from one backward pass per output element."""
    n_out = out.numel()
    jac = [_np.zeros((n_out, x.numel())) for x in diff]
    if not out.requires_grad:
        return jac
    host = out._device.backend
    for j in range(n_out):
        seed = _np.zeros(n_out, dtype=out._data.dtype)
        seed[j] = 1
        g = _Tensor._make(host.from_host(seed.reshape(out.shape)), out._device)
        grads = grad([out], diff, [g], retain_graph=True, allow_unused=True)
        for xi, gx in enumerate(grads):
            if gx is not None:
                jac[xi][j] = _np.asarray(gx.detach()).reshape(-1)
    return jac


def _numeric_jacobian(fn, inputs, diff, sizes: dict, eps) -> dict:
    """{output index: per input, the (n_out, n_in) central-difference Jacobian}; sizes: output index -> numel."""
    from ember.grad_mode import no_grad

    def evaluate():
        with no_grad():
            outs = _as_outputs(fn(*inputs))
        # A copy: an output that is a view of an input would otherwise change with the next nudge.
        return [_np.array(outs[k].detach(), dtype=_np.float64).reshape(-1) for k in sizes]

    cols: dict = {k: [_np.zeros((n, x.numel())) for x in diff] for k, n in sizes.items()}
    for xi, x in enumerate(diff):
        data = x._data  # written element by element, so strided (non-contiguous) inputs work too
        for e, idx in enumerate(_np.ndindex(*x.shape)):
            orig = data[idx].item()
            data[idx] = orig + eps
            plus = evaluate()
            data[idx] = orig - eps
            minus = evaluate()
            data[idx] = orig
            for k, p, m in zip(sizes, plus, minus):
                cols[k][xi][:, e] = (p - m) / (2 * eps)
    return cols


def retain_node_grad(t) -> None:
    """Make backward store a non-leaf tensor's gradient in its `.grad` (`Tensor.retain_grad`)."""
    node = current_grad_fn(t)
    if node is None:
        return
    if node.retained is None:
        node.retained = {}
    node.retained[t._output_nr] = weakref.ref(t)


# Imported last: the tensor and op layers import this module.
import numpy as _np  # noqa: E402

from ember import dtypes as _dt  # noqa: E402
from ember import ops as _ops  # noqa: E402
from ember.backends.meta import MetaArray as _MetaArray  # noqa: E402
from ember.tensor import _FLOAT_NP  # noqa: E402
from ember.tensor import Tensor as _Tensor  # noqa: E402
