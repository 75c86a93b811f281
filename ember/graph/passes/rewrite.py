"""Shared machinery of the passes: copying a graph into a new one with substitutions, users, keys.

Graphs are append-only and numbered by position, so a pass never edits one: it walks the old
graph in order and rebuilds the new one, mapping each old value to its replacement.
"""

from __future__ import annotations

import numpy as np

from ember.graph.ir import CAPTURE, GNode, Graph, Value


def is_stateful(node: GNode) -> bool:
    """Whether a node has effects beyond its outputs (assignments, random draws): never drop or merge it."""
    return node.kind == "op" and bool(getattr(node.op, "stateful", False))


def same_spec(a, b) -> bool:
    """Equal shape, dtype and device: a value may stand in for another only then."""
    return (
        isinstance(a, Value)
        and isinstance(b, Value)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device is b.device
    )


def static_shape(v) -> bool:
    """Every dimension of the value is known at build time."""
    return all(d is not None for d in v.shape)


def users_of(graph: Graph) -> dict:
    """Value -> list of (node, input position) reading it."""
    users: dict = {}
    for n in graph.nodes:
        for i, x in enumerate(n.inputs):
            if isinstance(x, Value):
                users.setdefault(x, []).append((n, i))
    return users


def control_targets(graph: Graph) -> set:
    """Ids of nodes other nodes wait for through control dependencies."""
    return {c.id for n in graph.nodes for c in n.control_inputs}


class Rewriter:
    """Builds a new graph from an old one; `vmap` sends each old value to its new value."""

    def __init__(self, src: Graph) -> None:
        self.src = src
        self.graph = Graph(src.name)
        self.vmap: dict = {}
        self.nmap: dict = {}  # old node -> new node (for control dependencies)

    def value(self, x):
        """The new form of an input: a mapped Value, or a Python scalar unchanged."""
        return self.vmap[x] if isinstance(x, Value) else x

    def inputs(self, node: GNode) -> list:
        """The node's inputs mapped into the new graph."""
        return [self.value(x) for x in node.inputs]

    def copy(self, node: GNode, inputs=None) -> GNode:
        """Append a copy of `node` (with `inputs` if given) keeping its output specs, name and devices."""
        g = self.graph
        new = g._new_node(node.kind, node.op, self.inputs(node) if inputs is None else inputs, node.attrs, node.name)
        new.control_inputs = [self.nmap[c] for c in node.control_inputs if c in self.nmap]
        new.outputs = [Value(v.shape, v.dtype, new, i, v.device) for i, v in enumerate(node.outputs)]
        if node.kind == CAPTURE:
            g._captures[id(node.attrs["tensor"])] = new.outputs[0]
        for old, v in zip(node.outputs, new.outputs):
            self.vmap[old] = v
        self.nmap[node] = new
        return new

    def add_op(self, op, inputs, attrs: dict, device, name=None):
        """Append a new op node (its shape rule runs); returns its Value(s)."""
        return self.graph.add_op(op, inputs, attrs, device, name)

    def alias(self, old: Value, new) -> None:
        """From now on, readers of `old` read `new` instead."""
        self.vmap[old] = new

    def outputs(self, outputs) -> list:
        """The old graph's requested outputs in the new graph."""
        return [self.value(v) for v in outputs]


def host_value(value) -> np.ndarray:
    """A constant's value as a NumPy array: a device array (CuPy's) is copied from its device."""
    if getattr(value, "__cuda_array_interface__", None) is not None:
        return value.get()
    return np.asarray(value)


def freeze(x):
    """A hashable structural key for attribute values (slices, arrays, nested containers)."""
    if isinstance(x, bool) or x is None or x is Ellipsis:
        return (type(x).__name__, x)
    if isinstance(x, float):
        return ("float", x.hex())  # 0.0 and -0.0 (and 1 and 1.0) must stay apart
    if isinstance(x, (int, str, bytes)):
        return (type(x).__name__, x)
    if isinstance(x, np.dtype):
        return ("dtype", x.str, x.name)
    if isinstance(x, np.generic):
        return ("npscalar", x.dtype.str, x.tobytes())
    if isinstance(x, np.ndarray) or getattr(x, "__cuda_array_interface__", None) is not None:
        return ("ndarray", x.dtype.str, tuple(x.shape), np.ascontiguousarray(host_value(x)).tobytes())
    if isinstance(x, slice):
        return ("slice", freeze(x.start), freeze(x.stop), freeze(x.step))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(freeze(e) for e in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((repr(k), freeze(v)) for k, v in x.items())))
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted(repr(freeze(e)) for e in x)))
    if isinstance(x, type):
        return ("type", x.__module__, x.__qualname__)
    return ("id", id(x))  # anything else (tensors, variables, callables) is equal only to itself
