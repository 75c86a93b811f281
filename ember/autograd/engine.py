"""The autograd engine: recorded nodes, `backward` and `grad`.

Every op call that needs gradients is recorded (`record`) as a `Node`: the op, its attributes,
edges to the nodes (or leaf tensors) that produced its inputs, and the tensors its gradient rule
needs. `backward` walks the nodes in reverse topological order and calls each op's `vjp`, which is
written in Ember ops, so with `create_graph=True` the backward pass is itself recorded and can be
differentiated again. Views and in-place writes are in `views.py`.
"""

from __future__ import annotations

import itertools
import weakref

from ember.autograd.grad_mode import state as _grad_state
from ember.kernels.background import NotCompiledYet, numpy_instead, serves


class Node:
    """One recorded op application: the autograd graph's unit (`tensor.grad_fn`)."""

    __slots__ = (
        "op", "attrs", "edges", "in_meta", "_saved", "_out_saved", "freed", "retained", "seq", "view_version",
        "__weakref__",
    )

    def __init__(self, op, attrs: dict, inputs: tuple, outputs: tuple) -> None:
        # The hottest function of eager training (one call per recorded op): written for speed.
        self.op = op
        self.attrs = attrs
        self.freed = False
        self.retained = None
        self.seq = _next_seq()
        # For a view, the version of its storage when this node was made: a later in-place write
        # through another alias makes the node stale (see `current_grad_fn`).
        is_view = op.is_view
        if is_view and is_view != "multi" and outputs and outputs[0]._base is not None:
            self.view_version = outputs[0]._version[0]
        else:
            self.view_version = None
        edges = []
        meta = []
        needs = 0  # bit i: input i needs a gradient
        bit = 1
        for x in inputs:
            if isinstance(x, _Tensor):
                d = x._data
                meta.append((d.shape, d.dtype))
                if x._requires_grad:
                    fn = x._grad_fn if x._base is None else _views.current_grad_fn(x)
                    edges.append((fn, x._output_nr) if fn is not None else (x, -1))
                    needs |= bit
                    bit <<= 1
                    continue
            else:  # a Python number, or a NumPy array operand (ndarray @ tensor): its shape if it has one
                meta.append((x.shape, x.dtype) if type(x) is _np.ndarray else None)
            edges.append(None)
            bit <<= 1
        self.edges = edges
        self.in_meta = meta
        save = saved_inputs(op, needs, len(inputs))
        if save:
            saved = self._saved = {}
            for i in save:
                x = inputs[i]
                if isinstance(x, _Tensor):
                    saved[i] = (x, x._version[0])
                elif type(x) is _np.ndarray:  # a NumPy operand (ndarray @ tensor): rules need a tensor
                    saved[i] = (_Tensor._make(x, outputs[0]._device), None)
                else:
                    saved[i] = (x, None)
        else:
            self._saved = None
        save_outputs = op.save_outputs
        if save_outputs:
            out_saved = self._out_saved = {}
            for i in save_outputs:  # a loop, not a comprehension: no frame of its own on this hot path
                t = outputs[i]
                version = t._version
                out_saved[i] = (t._data, version, version[0], t._device)
        else:
            self._out_saved = None
        # The floating-point outputs point at the new node (integer and bool outputs have no gradient).
        if len(outputs) == 1:
            t = outputs[0]
            if t._data.dtype in _FLOAT_NP:
                t._requires_grad = True
                t._grad_fn = self
                if t._output_nr:  # an in-place write into an output of a multi-output op
                    t._output_nr = 0
            return
        i = 0
        for t in outputs:
            if t._data.dtype in _FLOAT_NP:
                t._requires_grad = True
                t._grad_fn = self
                t._output_nr = i
            i += 1

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


_SAVES: dict = {}  # (op, inputs needing a gradient as bits) -> the inputs its gradient rules read


def _reads_of(op, needs: int, n: int) -> tuple:
    """The inputs (of n) that the gradient rules of the inputs flagged in `needs` read, cached in _SAVES."""
    save = _SAVES[(op, needs)] = tuple(sorted({j for i in range(n) if needs >> i & 1 for j in op.grad_reads.get(i, ())}))
    return save


# Creation numbers of nodes (Node.seq): tell the nodes an in-place op made from older ones.
_next_seq = itertools.count(1).__next__


def seq_mark() -> int:
    """A mark that every node created from now on is newer than (see `protect_saved`)."""
    return _next_seq()


# `record(op, attrs, inputs, outputs)`: record that `op` made `outputs` from `inputs`. Making the node is recording
# it (it points its floating-point outputs at itself). The dispatch fast paths (`ember.dispatch.unary_path` and
# `binary_path`) build the same node inline for one or two operands.
record = Node

def saved_inputs(op, needs: int, n: int):
    """The positions of the inputs (of n) that a node of `op` saves when the inputs flagged in `needs` (bit i:
    input i) need a gradient: what their gradient rules read (`grad_reads`), or what the op declares saved."""
    reads = op.grad_reads
    if reads is not None:
        if not reads:
            return ()
        save = _SAVES.get((op, needs))
        return save if save is not None else _reads_of(op, needs, n)
    save = op.save_inputs
    return range(n)[save] if type(save) is slice else save  # a slice: ops with a variable number of inputs


def walk(roots, follow=None) -> list:
    """Every node reachable from `roots` (nodes) through edges, each once (a list, depth first);
    `follow(node)` may prune."""
    stack = [n for n in roots if n is not None]
    seen = {id(n) for n in stack}
    found = []
    while stack:
        node = stack.pop()
        found.append(node)
        for edge in node.edges:
            if edge is None:
                continue
            parent = edge[0]
            if type(parent) is Node and id(parent) not in seen and (follow is None or follow(parent)):
                seen.add(id(parent))
                stack.append(parent)
    return found


def _collect(roots: list, within=None) -> tuple:
    """Count, for each node and each leaf (by id) reachable from the roots (nodes), how many edges point at it
    (one depth-first pass, as `walk` makes, counting as it goes); with `within`, nodes outside it are left out."""
    deps: dict = {}
    leaves: dict = {}
    stack = list(roots)
    seen = set(stack)
    while stack:
        for edge in stack.pop().edges:
            if edge is None:
                continue
            parent = edge[0]
            if type(parent) is Node:
                if within is not None and parent not in within:
                    continue
                deps[parent] = deps.get(parent, 0) + 1
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
            else:
                key = id(parent)
                leaves[key] = leaves.get(key, 0) + 1
    return deps, leaves


def _paths_to(roots: list, target_nodes: set, target_leaves: dict) -> tuple:
    """(reached, runs) for a pass that only computes the gradients of some tensors: `runs`, the nodes with one of
    them above (a target node, or a target leaf on an edge); `reached`, those and the target nodes, every node whose
    output gradients the pass must complete."""
    runs: set = set()
    above: dict = {}  # node -> whether a target is above it (through its edges)
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in above:
                continue
            if not expanded:
                stack.append((node, True))
                for edge in node.edges:
                    if edge is not None and type(edge[0]) is Node and edge[0] not in above:
                        stack.append((edge[0], False))
                continue
            hit = False
            for edge in node.edges:
                if edge is None:
                    continue
                parent = edge[0]
                if type(parent) is Node:
                    hit = hit or parent in target_nodes or above.get(parent, False)
                else:
                    hit = hit or id(parent) in target_leaves
            above[node] = hit
            if hit:
                runs.add(node)
    reached = runs | {n for n in target_nodes if n in above}
    return reached, runs


def _fit(g, shape, np_dtype):
    """Reduce a broadcast gradient to the input's shape and cast it to the input's dtype."""
    if g.shape != shape:
        g = _dispatch.apply(_OPS["sum_to_size"], g, shape=tuple(shape))
    if g._data.dtype != np_dtype:
        g = _dispatch.apply(_OPS["cast"], g, dtype=np_dtype)
    return g


@serves
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
            fn = _views.current_grad_fn(x)
            if fn is None:
                capture_leaf.setdefault(id(x), []).append(k)
            else:
                capture_node.setdefault((fn, x._output_nr), []).append(k)

    buffers: dict = {}
    leaf_grads: dict = {}  # id(leaf) -> (leaf, grad)
    root_nodes = []

    # `stored`: the arrays a .grad may not take as its own, because another .grad or the caller holds them: the
    # gradients passed in (an identity rule such as add's hands them on), then each array a .grad takes.
    stored = set()
    prev_mode = _grad_state.enabled
    _grad_state.enabled = create_graph
    try:
        for t, g in zip(roots, grads):
            stored.add(id(g._data))
            fn = _views.current_grad_fn(t)
            if fn is None:
                prev = leaf_grads.get(id(t))
                leaf_grads[id(t)] = (t, g if prev is None else prev[1] + g)
                continue
            buf = buffers.setdefault(fn, [None] * fn.op.n_outputs)
            nr = t._output_nr
            buf[nr] = g if buf[nr] is None else buf[nr] + g
            if fn not in root_nodes:
                root_nodes.append(fn)

        runs = None  # with inputs: the nodes on a path to one (run), the rest of the graph left alone, as PyTorch does
        if inputs is not None:
            reached, runs = _paths_to(root_nodes, {fn for fn, _ in capture_node}, capture_leaf)
            root_nodes = [n for n in root_nodes if n in reached]
            deps, _ = _collect(root_nodes, reached)
            leaf_edges = None
        else:
            # backward() accumulates each leaf's gradient as soon as its last edge is done, so a
            # post-accumulate hook (DDP's) can act on it while the rest of the pass runs.
            deps, leaf_edges = _collect(root_nodes)
        anomaly = _anomaly.state.enabled  # read once: the mode is switched between passes, not inside one
        ready = []
        for n in root_nodes:  # (a loop, not a comprehension: no frame of its own, and there is mostly one root)
            if n not in deps:
                ready.append(n)
        while ready:
            node = ready.pop()
            out_grads = buffers.pop(node)
            if node.retained is not None:  # hooks on the outputs' tensors (register_hook), then retain_grad below
                out_grads = _hooks.run_node_hooks(node, out_grads)
            if capture_node:
                for nr, g in enumerate(out_grads):
                    for k in capture_node.get((node, nr), ()):
                        results[k] = g
            if node.retained:
                for nr, ref in node.retained.items():
                    t = ref()
                    if t is not None and out_grads[nr] is not None:
                        _accumulate_retained(t, out_grads[nr], create_graph)
            if runs is not None and node not in runs:  # an input's node with no other input above it
                continue
            if node.freed:
                node._raise_freed()
            try:
                if len(out_grads) == 1:  # the common case, without all()'s generator
                    in_grads = (None,) * len(node.edges) if out_grads[0] is None else node.op.vjp(node, out_grads[0])
                elif all(g is None for g in out_grads):
                    in_grads = (None,) * len(node.edges)
                else:
                    in_grads = node.op.vjp(node, *out_grads)
            except NotCompiledYet:  # a kernel of a fast path is compiling in the background: NumPy this time
                in_grads = numpy_instead(node.op.vjp, node, *out_grads)
            except Exception:
                if anomaly:  # the forward call that made the node, as a warning before the error
                    _anomaly.report(node)
                raise
            if type(in_grads) is not tuple and not isinstance(in_grads, (tuple, list)):
                in_grads = (in_grads,)
            if anomaly:
                _anomaly.check_node(node, in_grads)
            if not retain_graph and (node._saved is not None or node._out_saved is not None):
                node._saved = node._out_saved = None  # node.release() inline
                node.freed = True
            n_grads = len(in_grads)
            in_meta = node.in_meta
            for i, edge in enumerate(node.edges):
                if edge is None:
                    continue
                parent, nr = edge
                if runs is not None and (parent not in reached if type(parent) is Node else id(parent) not in capture_leaf):
                    continue
                g = in_grads[i] if i < n_grads else None
                if g is not None:
                    shape, np_dtype = in_meta[i]
                    data = g._data
                    dtype = data.dtype
                    if data.shape != shape or (dtype is not np_dtype and dtype != np_dtype):
                        g = _fit(g, shape, np_dtype)
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
                else:
                    key = id(parent)
                    if g is not None:  # the leaf's gradient so far (summed here, accumulated into .grad below)
                        prev = leaf_grads.get(key)
                        leaf_grads[key] = (parent, g if prev is None else prev[1] + g)
                    if leaf_edges is not None:
                        leaf_edges[key] -= 1
                        if leaf_edges[key] == 0 and key in leaf_grads:
                            _accumulate_into_leaf(parent, leaf_grads.pop(key)[1], create_graph, stored)
        if leaf_edges is not None:  # leaves that were roots themselves, with no edge into them
            for leaf, g in leaf_grads.values():
                _accumulate_into_leaf(leaf, g, create_graph, stored)
    finally:
        _grad_state.enabled = prev_mode

    if inputs is not None:
        for key, (leaf, g) in leaf_grads.items():
            if key in capture_leaf and leaf._backward_hooks:
                g = _hooks.run_leaf_hooks(leaf, g)
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

    return None


def _accumulate_into_leaf(leaf, g, create_graph: bool, stored: set, run_hooks: bool = True) -> None:
    if run_hooks and leaf._backward_hooks:  # register_hook's hooks see the whole gradient first
        g = _hooks.run_leaf_hooks(leaf, g)
    # A gradient the pass made is a tensor of no graph and no view (detach would copy its fields only), unless
    # create_graph recorded it or an identity rule passed on a view or a tensor that requires grad.
    if not create_graph and (g._requires_grad or g._base is not None):
        g = g.detach()
    tracing = _entered[0]
    current = leaf.grad if tracing else leaf._grad  # under ember.jit the read is recorded (graph/trace.py, read_grad)
    if current is None:
        data = g._data
        # A gradient may alias another leaf's, the caller's gradient, or be a read-only broadcast view: own a copy.
        flags = getattr(data, "flags", None)
        if flags is not None and (not flags.owndata or not getattr(flags, "writeable", True) or id(data) in stored):
            g = g.clone() if not create_graph else g
        stored.add(id(g._data))
        if tracing:
            leaf.grad = g
        else:  # the setter's checks hold by construction: _fit gave g the leaf's shape and dtype
            leaf._grad = g
    elif create_graph:
        leaf.grad = current + g
    elif type(current._data) is _np.ndarray and type(g._data) is _np.ndarray:
        current._data += g._data.astype(current._data.dtype, copy=False)
        current._version[0] += 1
    else:  # symbolic or another backend: an ordinary in-place op (graph building records it)
        prev = _grad_state.enabled
        _grad_state.enabled = False
        try:
            current.add_(g)
        finally:
            _grad_state.enabled = prev
    if leaf._post_accumulate_grad_hooks:
        _hooks.run_post_accumulate_grad_hooks(leaf)


def _accumulate_retained(t, g, create_graph: bool) -> None:
    """Add g into a non-leaf's .grad (Tensor.retain_grad), as PyTorch: a copy the first time, so that it shares
    memory with no other gradient and not with the caller's, then a sum on each later pass."""
    if not create_graph:
        g = g.detach()
    current = t.grad
    t.grad = g.clone() if current is None else current + g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(tensors)/d(leaves) into each leaf's `.grad`, or only into the `.grad` of `inputs` (leaves or
    not) where given (PyTorch's `autograd.backward`)."""
    if isinstance(tensors, _Tensor):
        tensors = (tensors,)
        if grad_tensors is None or isinstance(grad_tensors, _Tensor):
            grad_tensors = (grad_tensors,)
    else:
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
    if inputs is None:
        run_backward(roots, grads, retain_graph=retain_graph, create_graph=create_graph)
        return
    chosen = _chosen_inputs(inputs)
    found = run_backward(roots, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=chosen,
                         allow_unused=True)
    stored = {id(g._data) for g in grads}  # as run_backward's: the caller's gradients are never a .grad's own
    for x, g in zip(chosen, found):
        if g is not None:  # an input the outputs do not reach keeps its .grad, as in PyTorch (hooks ran in the pass)
            _accumulate_into_leaf(x, g, create_graph, stored, run_hooks=False)


def _chosen_inputs(inputs) -> list:
    """backward(inputs=...) as a list of distinct tensors that require grad; a one-line error otherwise."""
    chosen = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
    if not chosen:
        raise RuntimeError("backward: the inputs argument cannot be empty; leave it out to accumulate into every leaf")
    unique = []
    for k, x in enumerate(chosen):
        if not isinstance(x, _Tensor):
            raise TypeError(f"backward: inputs must be tensors, got {type(x).__name__} at position {k}")
        if not x._requires_grad:
            raise RuntimeError(f"backward: input {k} (shape {tuple(x.shape)}) does not require grad, so it can have "
                               "no .grad; call requires_grad_() on it or leave it out of inputs")
        if all(x is not y for y in unique):
            unique.append(x)
    return unique


def _initial_grad(t, g, what: str):
    if g is None:
        data = t._data
        if (data.size if type(data) is _np.ndarray else t.numel()) != 1:
            raise RuntimeError(
                f"{what}: grad can be implicitly created only for scalar outputs, but the output has "
                f"shape {tuple(t.shape)}; pass a gradient of that shape"
            )
        if type(data) is _np.ndarray:  # the common case, without a dispatched op
            ones = _np.empty(data.shape, data.dtype)
            ones.fill(1)  # np.ones is these two calls behind a Python wrapper
            return _Tensor._make(ones, t._device)
        return _dispatch.apply(_OPS["full_like"], t, value=1, dtype=None)
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


def retain_node_grad(t) -> None:
    """Make backward store a non-leaf tensor's gradient in its `.grad` (`Tensor.retain_grad`)."""
    node = _views.current_grad_fn(t)
    if node is None:
        return
    if node.retained is None:
        node.retained = {}
    node.retained[t._output_nr] = weakref.ref(t)


# Imported last: the tensor layer and dispatch import this module. The ops the engine runs itself (reducing a
# broadcast gradient, casting it, the first gradient of a non-NumPy output) are found by name in the registry,
# which every op module fills as it is imported: the engine builds on the op contract, not on the op modules.
import numpy as _np  # noqa: E402

from ember import dispatch as _dispatch  # noqa: E402
from ember.autograd import anomaly_mode as _anomaly  # noqa: E402
from ember.autograd import hooks as _hooks  # noqa: E402
from ember.autograd import views as _views  # noqa: E402
from ember.interpreter import entered as _entered  # noqa: E402
from ember.op import OPS as _OPS  # noqa: E402
from ember.tensor import _FLOAT_NP  # noqa: E402
from ember.tensor import Tensor as _Tensor  # noqa: E402
