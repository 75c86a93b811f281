"""The graph IR: nodes (op, inputs, attributes, output specs) in topological order.

A `Value` is one output of a node. It subclasses `MetaArray` (shape and dtype, no data), so every
op's shape rule runs on it unchanged; dimensions may be None (unknown). A symbolic `Tensor` is a
Tensor whose data is a Value: the same ops, autograd and methods work on it, and each op call
appends a node here instead of computing.
"""

from __future__ import annotations

import itertools

import numpy as np

from ember.backends.meta import MetaArray
from ember.device import Device
from ember.errors import fmt_shape
from ember.size import size_as_is
from ember.symbolic import SymInt

# Node kinds besides "op": where values enter a graph.
PLACEHOLDER = "placeholder"  # fed at run time (ember.v1 placeholders, jit arguments)
CAPTURE = "capture"  # an outside tensor read at every run (parameters, closure tensors)
CONSTANT = "constant"  # a fixed array baked into the graph
VARIABLE = "variable"  # an ember.v1 Variable's storage


class Value(MetaArray):
    """A symbolic array: output `index` of graph node `node`."""

    __slots__ = ("node", "index", "device")
    symbolic = True

    def __init__(self, shape, dtype, node: GNode, index: int, device) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.node = node
        self.index = index
        self.device = device

    @property
    def graph(self) -> Graph:
        return self.node.graph

    @property
    def size(self):
        n = 1
        for d in self.shape:
            if d is None:
                return None
            n *= d
        return n

    def spec_str(self) -> str:
        """float32[?, 10] @cpu"""
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}] @{self.device}"

    def __repr__(self) -> str:
        return f"%{self.node.id}" + (f".{self.index}" if len(self.node.outputs) > 1 else "")

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other


class GNode:
    """One node: an op applied to input values (or Python scalars), with attributes."""

    __slots__ = ("graph", "id", "kind", "op", "inputs", "attrs", "outputs", "name", "control_inputs", "__weakref__")

    def __init__(self, graph, id_, kind, op, inputs, attrs, name=None) -> None:
        self.graph = graph
        self.id = id_
        self.kind = kind
        self.op = op
        self.inputs = list(inputs)
        self.attrs = attrs
        self.outputs: list[Value] = []
        self.name = name
        self.control_inputs: list[GNode] = []

    @property
    def op_name(self) -> str:
        return self.op.name if self.op is not None else self.kind

    def value_inputs(self) -> list:
        """The inputs that are values of this graph (not Python scalars)."""
        return [x for x in self.inputs if isinstance(x, Value)]

    def __repr__(self) -> str:
        return f"<node %{self.id} {self.op_name}>"


def _fmt_attr(v) -> str:
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, np.ndarray):
        return f"array{fmt_shape(v.shape)}"
    if isinstance(v, Device):
        return str(v)
    return repr(v)


class Graph:
    """An append-only list of nodes; appending keeps it topologically ordered."""

    _names = itertools.count()

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"graph{next(Graph._names)}"
        self.nodes: list[GNode] = []
        self._by_name: dict = {}
        self._captures: dict = {}  # id(tensor) -> capture node's value
        self._control: list = []  # stack of control-dependency node lists (ember.v1)
        self._builder = None

    @property
    def builder(self):
        """The interpreter that adds ops on this graph's values to it (ember.graph.build.GraphBuilder)."""
        if self._builder is None:
            from ember.graph.build import GraphBuilder

            self._builder = GraphBuilder(self)
        return self._builder

    # --- building ------------------------------------------------------------------
    def _new_node(self, kind, op, inputs, attrs, name=None) -> GNode:
        node = GNode(self, len(self.nodes), kind, op, inputs, attrs, name)
        for deps in self._control:
            node.control_inputs.extend(d for d in deps if d not in node.control_inputs)
        if name is not None:
            if name in self._by_name:
                name = self.unique_name(name)
                node.name = name
            self._by_name[name] = node
        self.nodes.append(node)
        return node

    def static_size(self, value: Value):
        """What `Tensor.shape` gives for a value of this graph (ember.v1's graphs give TF's shapes)."""
        return size_as_is(value.shape)

    def unique_name(self, base: str) -> str:
        """base, base_1, base_2, ... : the first not yet used in this graph."""
        if base not in self._by_name:
            return base
        for i in itertools.count(1):
            cand = f"{base}_{i}"
            if cand not in self._by_name:
                return cand
        raise AssertionError("unreachable")

    def _outputs(self, node, specs, device) -> list:
        node.outputs = [Value(s.shape, s.dtype, node, i, device) for i, s in enumerate(specs)]
        return node.outputs

    def add_op(self, op, inputs, attrs: dict, device, name=None):
        """Append `op(*inputs, **attrs)`; the shape rule runs now, so errors surface here."""
        for x in inputs:
            if isinstance(x, Value) and x.node.graph is not self:
                raise ValueError(
                    f"{op.name}: input {x!r} belongs to graph {x.node.graph.name}, not {self.name}; "
                    "values of different graphs cannot be combined"
                )
        specs = op.infer(*inputs, **attrs)
        multi = isinstance(specs, tuple)
        node = self._new_node("op", op, inputs, attrs, name)
        outs = self._outputs(node, specs if multi else (specs,), device)
        return tuple(outs) if multi else outs[0]

    def placeholder(self, shape, dtype, device, name=None) -> Value:
        """A value fed at run time; None in shape is an unknown dimension (None shape: unknown rank)."""
        node = self._new_node(PLACEHOLDER, None, [], {"shape": shape}, name or self.unique_name("Placeholder"))
        return self._outputs(node, [MetaArray((), dtype)] if shape is None else [_spec(shape, dtype)], device)[0]

    def capture(self, tensor) -> Value:
        """The value of an outside tensor, read afresh at every run."""
        key = id(tensor)
        hit = self._captures.get(key)
        if hit is not None and hit.node.attrs["tensor"] is tensor:
            return hit
        node = self._new_node(CAPTURE, None, [], {"tensor": tensor})
        data = tensor._data
        value = self._outputs(node, [MetaArray(data.shape, data.dtype)], tensor._device)[0]
        self._captures[key] = value
        return value

    def constant(self, array, device, name=None) -> Value:
        """A fixed array stored in the graph."""
        node = self._new_node(CONSTANT, None, [], {"value": array}, name)
        return self._outputs(node, [MetaArray(np.shape(array), array.dtype)], device)[0]

    def variable(self, var, name=None) -> Value:
        """The current value of an ember.v1 Variable's storage."""
        node = self._new_node(VARIABLE, None, [], {"variable": var}, name)
        return self._outputs(node, [MetaArray(var.spec_shape, var.spec_dtype)], var.storage_device)[0]

    def control_dependencies(self, nodes):
        """Context manager: nodes built inside run only after `nodes` (ember.v1)."""
        graph = self

        class _Scope:
            def __enter__(self):
                graph._control.append(list(nodes))

            def __exit__(self, *exc):
                graph._control.pop()

        return _Scope()

    # --- inspection ------------------------------------------------------------------
    def node(self, name: str) -> GNode:
        """A node by name."""
        return self._by_name[name]

    def placeholders(self) -> list:
        """Nodes fed at run time."""
        return [n for n in self.nodes if n.kind == PLACEHOLDER]

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        return self.dump()

    def dump(self, nodes=None) -> str:
        """One line per node: `%4 = matmul(%1, %3) : float32[?, 10] @cpu`."""
        lines = []
        for n in nodes if nodes is not None else self.nodes:
            outs = ", ".join(repr(v) for v in n.outputs) or "()"
            if n.kind == "op":
                args = ", ".join(repr(x) if isinstance(x, Value) else _fmt_attr(x) for x in n.inputs)
                attrs = [f"{k}={_fmt_attr(v)}" for k, v in n.attrs.items()]
                call = f"{n.op.name}({', '.join(filter(None, [args] + attrs))})"
            elif n.kind == CAPTURE:
                t = n.attrs["tensor"]
                call = f"capture(<{type(t).__name__} {fmt_shape(t.shape)}>)"
            elif n.kind == CONSTANT:
                call = f"constant({_fmt_attr(n.attrs['value'])})"
            else:
                call = f"{n.kind}({n.name!r})" if n.name else n.kind
            if n.control_inputs:
                call += " ^" + ", ^".join(f"%{c.id}" for c in n.control_inputs)
            specs = ", ".join(v.spec_str() for v in n.outputs)
            lines.append(f"{outs} = {call}" + (f" : {specs}" if specs else ""))
        return "\n".join(lines)

    def check(self) -> None:
        """Assert the IR's invariants: ids are positions, inputs come earlier, outputs belong to nodes."""
        for i, n in enumerate(self.nodes):
            if n.id != i or n.graph is not self:
                raise AssertionError(f"node {n!r} is at position {i} of {self.name}")
            for x in n.inputs:
                if isinstance(x, Value) and (x.node.graph is not self or x.node.id >= i):
                    raise AssertionError(f"node {n!r} uses {x!r}, which is not defined before it")
            for c in n.control_inputs:
                if c.id >= i:
                    raise AssertionError(f"node {n!r} has a control input {c!r} defined after it")
            for k, v in enumerate(n.outputs):
                if v.node is not n or v.index != k:
                    raise AssertionError(f"output {k} of {n!r} does not point back at it")

    def needed_for(self, values) -> list:
        """The nodes that `values` (and control dependencies) depend on, in topological order."""
        need = set()
        stack = [v.node if isinstance(v, Value) else v for v in values]
        while stack:
            n = stack.pop()
            if n.id in need:
                continue
            need.add(n.id)
            stack.extend(x.node for x in n.inputs if isinstance(x, Value))
            stack.extend(n.control_inputs)
        return [self.nodes[i] for i in sorted(need)]

    # pictures are in ember.graph.dot
    def to_dot(self, outputs=None) -> str:
        """Graphviz DOT text for the graph (or the part `outputs` need)."""
        from ember.graph.dot import to_dot

        return to_dot(self, outputs)

    def render(self, path: str, outputs=None, format: str | None = None) -> str:
        """Draw the graph to SVG/PNG (by extension); without Graphviz, write the .dot and say how."""
        from ember.graph.dot import render

        return render(self, path, outputs, format)


def _spec(shape, dtype) -> MetaArray:
    spec = object.__new__(MetaArray)
    spec.shape = tuple(None if d is None or (type(d) is not SymInt and d == -1) else d if type(d) is SymInt
                       else int(d) for d in shape)
    spec.dtype = np.dtype(dtype)
    return spec
