"""Function graphs: the subgraphs that control-flow ops (ember.graph.control_flow) hold as attributes.

A function graph is an ordinary graph built from a Python function, nested in an `outer` graph.
While it is built its `FuncBuilder` is the interpreter on top of the stack, so every op goes into
it. A value of an enclosing graph used inside is *captured*: it becomes a placeholder here and an
extra input of the control-flow node outside (through every graph in between, for nested ones).
Control dependencies on nodes of enclosing graphs are lifted onto that node the same way.

Autograd records inside a function graph as anywhere else; its placeholders are leaves. So the
gradient of a function graph is autograd run on its outputs, back to its placeholders, in a new
function graph. Gradient rules read saved values of the forward graph; those values are the
*exports* (`Subgraph.exports`), which the forward control-flow op hands out at run time. While a
gradient graph is built, a *resolver* registered for the forward graph turns each forward value
into one of the gradient graph (an export picked out of the record, or the outer value a forward
placeholder stands for).

`Subgraph` is the finished, runnable form: its graph, input placeholders, outputs and exports,
compiled into executor plans on first use.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ember import interpreter as _interpreter
from ember.autograd import walk
from ember.backends.meta import is_symbolic
from ember.device import as_device
from ember.graph import ir
from ember.graph.build import GraphBuilder
from ember.graph.ir import CONSTANT, PLACEHOLDER, GNode, Value
from ember.ops._rules import FLOAT_NP
from ember.tensor import Tensor


class CaptureMixin:
    """Interpreter mixin: an op given values of enclosing graphs runs on their captured placeholders."""

    def prepare(self, op, inputs):
        graph = self.graph
        if any(isinstance(x, Tensor) and is_symbolic(x) and x._data.node.graph is not graph for x in inputs):
            return [graph.capture_tensor(x) if isinstance(x, Tensor) and is_symbolic(x) else x for x in inputs]
        return super().prepare(op, inputs)


class FuncBuilder(CaptureMixin, GraphBuilder):
    """The interpreter that builds a function graph."""


class FuncGraphMixin:
    """What makes a graph a function graph: its outer graph, its captures, resolvers and lifted dependencies."""

    builder_class = FuncBuilder

    def init_func(self, outer, device) -> None:
        """Set up a function graph nested in `outer`, whose control-flow node runs on `device`."""
        self.outer = outer
        self.func_device = device
        self.captures: list = []  # (outer Tensor, inner placeholder Tensor), in order of capture
        self._inner: dict = {}  # id(foreign Value) -> (that Value, the Tensor standing for it here)
        self.resolvers: dict = {}  # forward graph -> fn(Tensor of it) -> Tensor of this graph (gradients)
        self.lifted_control: list = []  # control inputs of enclosing graphs met inside

    @property
    def builder(self):
        if self._builder is None:
            self._builder = self.builder_class(self)
        return self._builder

    @property
    def root(self):
        """The outermost graph this one is nested in."""
        g = self
        while isinstance(g, FuncGraphMixin):
            g = g.outer
        return g

    def encloses(self, graph) -> bool:
        """Whether `graph` is this graph or one it is nested in."""
        g = self
        while True:
            if g is graph:
                return True
            if not isinstance(g, FuncGraphMixin):
                return False
            g = g.outer

    def capture_tensor(self, t: Tensor) -> Tensor:
        """The tensor of this graph standing for `t`, a tensor of an enclosing graph (or of a forward graph
        with a resolver); `t` itself if it is already of this graph."""
        v = t._data
        if v.node.graph is self:
            return t
        hit = self._inner.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        resolver = self.resolvers.get(v.node.graph)
        if resolver is not None:
            inner = resolver(t)
        else:
            outer_t = t
            if v.node.graph is not self.outer:  # from further out, or resolved by an enclosing gradient graph
                if not isinstance(self.outer, FuncGraphMixin):
                    raise ValueError(
                        f"a tensor of graph {v.node.graph.name} is used in a control-flow function of graph "
                        f"{self.root.name}; tensors of different graphs cannot be combined"
                    )
                outer_t = self.outer.capture_tensor(t)
            hit = self._inner.get(id(outer_t._data))
            if hit is not None and hit[0] is outer_t._data:
                inner = hit[1]
            else:
                inner = self.new_input(outer_t._data.shape, outer_t._data.dtype,
                                       outer_t._requires_grad and outer_t._data.dtype in FLOAT_NP)
                self.captures.append((outer_t, inner))
                self._inner[id(outer_t._data)] = (outer_t._data, inner)
        self._inner[id(v)] = (v, inner)
        return inner

    def new_input(self, shape, dtype, requires_grad: bool, name: str | None = None) -> Tensor:
        """A placeholder of this graph on the control-flow node's device (a leaf for autograd)."""
        value = self.placeholder(tuple(shape), dtype, self.func_device, name=name)
        t = Tensor._make(value, self.func_device)
        if requires_grad:
            t._requires_grad = True
        return t

    def control_dependencies(self, nodes):
        """Nodes of this graph become control inputs here; those of enclosing graphs are lifted onto the
        control-flow node (they run before it)."""
        own, lifted = [], []
        for n in nodes or ():
            (own if n.graph is self else lifted).append(n)
        for n in lifted:
            if n not in self.lifted_control:
                self.lifted_control.append(n)
        return ir.Graph.control_dependencies(self, own)

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Build this graph inside the block: its builder is the interpreter on top."""
        with self.builder:
            yield


class FuncGraph(FuncGraphMixin, ir.Graph):
    """A function graph on the plain IR."""

    def __init__(self, outer, device, name: str | None = None) -> None:
        ir.Graph.__init__(self, name)
        self.init_func(outer, device)


def current_graph(default=None):
    """The graph that ops built now go into: the top interpreter's if it builds one, else `default`."""
    top = _interpreter.current()
    return top.graph if isinstance(top, GraphBuilder) else default


# --- the finished subgraph ----------------------------------------------------------------------------
class Subgraph:
    """A function graph ready to run: input placeholders, outputs, control outputs and exports.

    `in_tensors` and `out_tensors` keep the autograd history built inside, which gradients use;
    `exports` are the values of the graph that gradient rules read (see `saved_values`).
    """

    def __init__(self, graph, in_tensors: list, out_tensors: list, control: list = (), varying: int = 0,
                 is_gradient: bool = False):
        self.graph = graph
        self.in_tensors = list(in_tensors)
        self.out_tensors = list(out_tensors)
        self.inputs = [t._data for t in self.in_tensors]
        self.outputs = [t._data for t in self.out_tensors]
        self.control = list(control)
        self.varying = varying  # inputs[:varying] change between runs of one node (loop variables)
        self.is_gradient = is_gradient  # built by a gradient rule (its own gradient is not supported)
        # Inputs that stay the same (captures) are read from outside by a gradient; the rest is exported.
        self.exports = saved_values(graph, self.out_tensors, set(self.inputs[varying:]))
        self.export_index = {v: i for i, v in enumerate(self.exports)}
        self.input_index = {v: i for i, v in enumerate(self.inputs)}
        self._plans: dict = {}
        self._lock = threading.Lock()

    @property
    def stateful(self) -> bool:
        """Whether running it has effects (assignments, random draws, ...): then it must run as asked."""
        return any(n.kind == "op" and getattr(n.op, "stateful", False) for n in self.graph.nodes)

    def plan(self, with_exports: bool):
        """The executor plan computing the outputs (and the exports)."""
        plan = self._plans.get(with_exports)
        if plan is None:
            with self._lock:
                plan = self._plans.get(with_exports)
                if plan is None:
                    from ember.graph.placement_exec import compile_plan

                    outs = self.outputs + (self.exports if with_exports else [])
                    plan = compile_plan(self.graph, outs, self.control)
                    host = as_device("cpu").backend
                    for step in plan.steps:
                        if step.backend is None:  # no_op and group steps have no outputs to place them
                            step.backend = self.graph.func_device.backend if hasattr(
                                self.graph, "func_device") else host
                    self._plans[with_exports] = plan
        return plan

    def run(self, arrays, with_exports: bool) -> tuple:
        """(outputs, exports) for input arrays (exports is None unless asked for)."""
        plan = self.plan(with_exports)
        feeds = dict(zip(self.inputs, arrays))
        # Plain runs: a loop feeds a run's outputs to the next, which an arena would overwrite.
        outs = plan.run(feeds, memory=False, parallel=False)
        n = len(self.outputs)
        return list(outs[:n]), (tuple(outs[n:]) if with_exports else None)

    def __repr__(self) -> str:
        return f"<subgraph {self.graph.name}: {len(self.inputs)} in, {len(self.outputs)} out>"


def saved_values(graph, out_tensors: list, exclude: set) -> list:
    """The values of `graph` that the gradient rules of its autograd history read (saved inputs and outputs),
    in a fixed order; constants and the values in `exclude` are left out (a gradient graph copies or
    captures those)."""
    roots = [t._grad_fn for t in out_tensors if isinstance(t, Tensor) and t._grad_fn is not None]
    found: dict = {}

    def add(v) -> None:
        if isinstance(v, Value) and v.node.graph is graph and v.node.kind != CONSTANT and v not in exclude:
            found.setdefault(id(v), v)

    for node in walk(roots):
        for x, _version in (node._saved or {}).values():
            if isinstance(x, Tensor):
                add(x._data)
        for data, *_ in (node._out_saved or {}).values():
            add(data)
    return sorted(found.values(), key=lambda v: (v.node.id, v.index))


def input_placeholders(graph) -> list:
    """The placeholder nodes of a graph."""
    return [n for n in graph.nodes if n.kind == PLACEHOLDER]


def copy_constant(graph, t: Tensor) -> Tensor:
    """A forward graph's constant, copied into `graph` (gradient graphs do not capture constants)."""
    node: GNode = t._data.node
    value = graph.constant(node.attrs["value"], t._device)
    return Tensor._make(value, t._device)
