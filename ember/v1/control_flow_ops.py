"""TF1's control flow: `cond`, `case` and `while_loop`, built as If and While nodes (ember.graph.control_flow).

As in TF1's graphs, both branches of a cond are built and one runs; a while_loop's condition and
body are built once and run until the condition fails. The functions run while their own graph
(a `FuncGraph`) is the default graph, so everything TF code does there lands in it; tensors of the
enclosing graph used inside are captured. Variables made inside are lifted into the outermost
graph (`init_scope`), as TF does for `get_variable` in a loop body; collections are the outermost
graph's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ember import interpreter as _interpreter
from ember.graph.build import GraphBuilder
from ember.graph.control_flow import build_cond, build_while
from ember.graph.func_graph import CaptureMixin, FuncGraphMixin
from ember.tensor import Tensor
from ember.v1 import nest
from ember.v1.builder import V1Builder
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.graph_api import Graph, Operation, _flat, as_node, get_default_graph
from ember.v1.state_ops import group, stop_gradient
from ember.v1.tensor_shape import TensorShape


class FuncBuilder(CaptureMixin, V1Builder):
    """Builds an ember.v1 function graph: captures, then TF1's dtype rules and placement."""


class FuncGraph(FuncGraphMixin, Graph):
    """The graph of a cond branch or a while_loop condition or body, nested in an outer graph."""

    builder_class = FuncBuilder

    def __init__(self, outer, device, name: str | None = None) -> None:
        Graph.__init__(self, name)
        self.init_func(outer, device)

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Build this graph: it is the default graph and its builder the interpreter on top."""
        with self.as_default(), self.builder:
            yield

    @property
    def device(self):
        """Where constants and random ops built inside go: an own tf.device scope, else the outer graph's."""
        if self._devices:
            return self._devices[-1]
        return getattr(self.outer, "device", self.func_device)

    def next_seed(self, op_seed):
        return self.root.next_seed(op_seed) if hasattr(self.root, "next_seed") else op_seed

    # Collections are the outermost graph's (summaries, update ops, losses made inside land there).
    def add_to_collection(self, key: str, value) -> None:
        self.root.add_to_collection(key, value)

    def get_collection(self, key: str, scope: str | None = None) -> list:
        return self.root.get_collection(key, scope)

    def get_collection_ref(self, key: str) -> list:
        return self.root.get_collection_ref(key)

    def control_dependencies(self, control_inputs):
        if control_inputs is None:
            return self._cleared_control()
        return FuncGraphMixin.control_dependencies(self, [as_node(c) for c in _flat(control_inputs)])


@contextlib.contextmanager
def init_scope() -> Iterator[None]:
    """Build in the outermost graph, outside any control-flow function being built (for variables and state)."""
    graph = get_default_graph()
    if not isinstance(graph, FuncGraphMixin):
        yield
        return
    builders = []  # the function graphs' builders on the interpreter stack, top first
    node = _interpreter.current()
    while node is not None:
        if isinstance(node, GraphBuilder) and isinstance(node.graph, FuncGraphMixin):
            builders.append(node)
        node = node.below
    for b in builders:
        _interpreter.remove(b)
    root = graph.root
    try:
        with root.as_default(), root.control_dependencies(None):
            yield
    finally:
        for b in reversed(builders):
            _interpreter.push(b)


def in_function_graph() -> bool:
    """Whether a cond branch or a while_loop function is being built now."""
    return isinstance(get_default_graph(), FuncGraphMixin)


# --- results of the functions -------------------------------------------------------------------------
def _leaves(result) -> tuple:
    """(tensors, control nodes, structure with markers) of what a branch returned."""
    flat = nest.flatten(result)
    tensors, controls, marks = [], [], []
    for x in flat:
        if isinstance(x, Operation):
            controls.append(x.node)
            marks.append(None)
        elif x is None:
            marks.append(None)
        else:
            tensors.append(convert_to_tensor(x))
            marks.append(len(tensors) - 1)
    return tensors, controls, marks


def _pack(structure, marks, outs, op_result):
    values = [op_result if m is None else outs[m] for m in marks]
    return nest.pack_sequence_as(structure, values)


def cond(pred, true_fn=None, false_fn=None, strict: bool = False, name: str | None = None, fn1=None, fn2=None):
    """true_fn() if pred else false_fn(): both are built into the graph, one runs (pred: a bool scalar tensor).

    The functions return the same structure of tensors (or operations); with strict=False a
    one-element list or tuple gives its element, as in TF1.
    """
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callable")
    if isinstance(pred, bool):
        raise TypeError("pred must not be a Python bool")
    graph = get_default_graph()
    with graph.name_scope(name or "cond"):
        pred = convert_to_tensor(pred)
        results: dict = {}

        def branch(fn, key):
            def run():
                res = fn()
                tensors, controls, marks = _leaves(res)
                results[key] = (res, marks)
                return tensors, controls

            return run

        try:
            outs = build_cond(pred, branch(true_fn, 0), branch(false_fn, 1), FuncGraph, name=name or "cond")
        except ValueError:
            if len(results) == 2:
                _same_structure(results[0][0], results[1][0])
            raise
        (t_res, t_marks), (f_res, f_marks) = results[0], results[1]
        _same_structure(t_res, f_res)
        if t_marks != f_marks:
            raise TypeError("cond: true_fn and false_fn must return tensors (or operations) in the same places")
        op_result = _cond_operation(pred, outs) if any(m is None for m in t_marks) else None
        packed = _pack(t_res, t_marks, outs, op_result)
    if not strict and isinstance(packed, (list, tuple)) and len(packed) == 1 and not hasattr(packed, "_fields"):
        return packed[0]
    return packed


def _same_structure(a, b) -> None:
    try:
        nest.assert_same_structure(a, b, "cond")
    except ValueError:
        raise ValueError("cond: true_fn and false_fn arguments to tf.cond must have the same number, type, and "
                         "overall structure of return values.") from None


def _cond_operation(pred, outs):
    """What a branch's operation stands for after the cond: the If node itself, as an operation."""
    node = (outs[0] if outs else None)
    if node is not None:
        return Operation(node._data.node)
    graph = pred._data.node.graph
    return Operation(graph.nodes[-1])  # the If node, which has only its record as output


def case(pred_fn_pairs, default=None, exclusive: bool = False, strict: bool = False, name: str = "case"):
    """The function of the first pair whose predicate holds (default() when none does), as nested conds."""
    pairs = list(pred_fn_pairs.items() if isinstance(pred_fn_pairs, dict) else pred_fn_pairs)
    if not pairs:
        if default is None:
            raise ValueError("case: give at least one (pred, fn) pair or a default")
        return default()
    if default is None:
        pairs, default = pairs[:-1], pairs[-1][1]  # the last function runs when no earlier predicate holds
    result = default
    for p, fn in reversed(pairs):
        result = _bind_cond(p, fn, result, strict)
    with get_default_graph().name_scope(name):
        return result()


def _bind_cond(p, fn, otherwise, strict):
    return lambda: cond(p, fn, otherwise, strict=strict)


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10, back_prop: bool = True,
               swap_memory: bool = False, name: str | None = None, maximum_iterations=None,
               return_same_structure: bool = False):
    """Repeat `body` on `loop_vars` while `cond` holds; the final loop variables, in their structure.

    Loop variables keep their shape from one iteration to the next unless `shape_invariants`
    (one TensorShape or list per variable, None for unknown dimensions) allows it to change.
    `maximum_iterations` (an int or a tensor) bounds the number of iterations.
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callable")
    single = not isinstance(loop_vars, (list, tuple, dict))
    structure = (loop_vars,) if single else loop_vars
    flat = [convert_to_tensor(v) for v in nest.flatten(structure)]
    if not flat:
        raise ValueError("while_loop: no loop variables given")
    if shape_invariants is not None:
        inv_struct = (shape_invariants,) if single else shape_invariants
        invariants = [None if s is None else tuple(TensorShape(s).as_list()) for s in _invariant_leaves(inv_struct)]
        if len(invariants) != len(flat):
            raise ValueError(f"while_loop: {len(invariants)} shape invariants for {len(flat)} loop variables")
    else:
        invariants = None
    graph = get_default_graph()

    def packed(vals):
        s = nest.pack_sequence_as(structure, list(vals))
        return s if isinstance(structure, dict) else tuple(s)

    def cond_fn(*vals):
        args = packed(vals)
        c = cond(args) if isinstance(structure, dict) else cond(*args)
        return convert_to_tensor(c)

    def body_fn(*vals):
        args = packed(vals)
        res = body(args) if isinstance(structure, dict) else body(*args)
        if not nest.is_sequence(res):
            res = [res]
        try:
            nest.assert_same_structure(list(structure) if not isinstance(structure, dict) else structure,
                                       res if isinstance(res, dict) else list(res), "while_loop")
        except ValueError as e:
            raise ValueError(f"while_loop: body returned a structure unlike loop_vars ({e})") from None
        return [convert_to_tensor(x) for x in nest.flatten(res)]

    with graph.name_scope(name or "while"):
        max_iter = maximum_iterations
        if max_iter is not None and is_symbolic(max_iter) or isinstance(max_iter, Tensor):
            max_iter = convert_to_tensor(max_iter)
        outs = build_while(cond_fn, body_fn, flat, FuncGraph, shape_invariants=invariants,
                           maximum_iterations=max_iter, name=name or "while")
        if not back_prop:
            outs = [stop_gradient(o) if o.is_floating_point() else o for o in outs]
    result = nest.pack_sequence_as(structure, outs)
    if len(flat) == 1 and not return_same_structure:
        return outs[0]
    return result[0] if single else result


def _invariant_leaves(structure) -> list:
    """Shape invariants, one per loop variable: a TensorShape, list or tuple of dims is one leaf."""
    if isinstance(structure, TensorShape) or structure is None:
        return [structure]
    if isinstance(structure, (list, tuple)) and all(d is None or isinstance(d, int) for d in structure):
        return [structure]
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in _invariant_leaves(structure[k])]
    return [leaf for x in structure for leaf in _invariant_leaves(x)]


def tuple_(tensors, name: str | None = None, control_inputs=None) -> list:
    """The tensors, each available only after all of them (and `control_inputs`) are computed."""
    from ember.v1.state_ops import identity

    deps = [t for t in tensors if t is not None] + list(control_inputs or [])
    gate = group(*deps)
    with get_default_graph().control_dependencies([gate]):
        return [None if t is None else identity(t) for t in tensors]
