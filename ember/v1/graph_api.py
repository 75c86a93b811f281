"""TF1's graph objects: `Graph` (with collections and a default-graph stack), `Operation`, scopes."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator

from ember.device import Device, as_device, default_device
from ember.graph import ir
from ember.tensor import Tensor
from ember.v1.graph_tensor import GraphTensor
from ember.v1.naming import default_name, type_name
from ember.v1.static_shapes import add_op_on_unknown_rank
from ember.v1.tensor_shape import StaticShape, UnknownRankShape

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"


class GraphKeys:
    """The names of TF1's standard collections."""

    GLOBAL_VARIABLES = GLOBAL_VARIABLES
    VARIABLES = GLOBAL_VARIABLES
    TRAINABLE_VARIABLES = TRAINABLE_VARIABLES
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    GLOBAL_STEP = "global_step"
    SUMMARIES = "summaries"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    SAVERS = "savers"
    TRAIN_OP = "train_op"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"


class Graph(ir.Graph):
    """An Ember graph with what TF1 programs expect of one: named nodes, name scopes, collections, a default device.

    Every node gets a name when it is made: the one asked for, or TF1's default for its op
    ("MatMul", "add", "Const"), inside the current name scope and made unique as TF1 does
    ("add", "add_1", ...; case-insensitively).
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.collections: dict = {}
        self.gradient_records: list = []  # how each gradients() call was built (see specialize.py)
        self.seed: int | None = None  # graph-level random seed (set_random_seed)
        self._seed_count = 0
        self._name_stack = ""  # the current name scope, "outer/inner"
        self._names_in_use: dict = {}  # lower-cased name -> how many times it was handed out
        self._devices: list = []
        self._finalized = False
        self.unknown_rank: set = set()  # values whose rank TF would not know (see static_shapes.py)

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """`name`, or `name_1`, `name_2`, ...: the first not yet used (TF1's rule, case-insensitive)."""
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    def _new_node(self, kind, op, inputs, attrs, name=None) -> ir.GNode:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        if name is None:
            name = self.scoped_name(default_name(kind, op))
        elif name in self._by_name:
            name = self.unique_name(name)
        else:
            self._names_in_use.setdefault(name.lower(), 1)
        return super()._new_node(kind, op, inputs, attrs, name)

    # --- static shapes ------------------------------------------------------------------
    def placeholder(self, shape, dtype, device, name=None) -> ir.Value:
        """A value fed at run time; None dimensions are unknown, and shape=None makes its rank unknown."""
        value = super().placeholder(shape, dtype, device, name)
        if shape is None:
            self.unknown_rank.add(value)
        return value

    def add_op(self, op, inputs, attrs: dict, device, name=None):
        """Append `op(*inputs, **attrs)`; on an input of unknown rank, with TF's static shape rules for it."""
        if self.unknown_rank and any(isinstance(x, ir.Value) and x in self.unknown_rank for x in inputs):
            return add_op_on_unknown_rank(self, op, inputs, attrs, device, name, super().add_op)
        return super().add_op(op, inputs, attrs, device, name)

    def static_size(self, value: ir.Value) -> StaticShape:
        """`tensor.shape`: TF's static shape, a tuple of ints and Nones with TensorShape's methods."""
        return UnknownRankShape(value.shape) if value in self.unknown_rank else StaticShape(value.shape)

    def refine_shape(self, value: ir.Value, shape) -> None:
        """`set_shape`: the static shape made `shape` (a TensorShape already merged with the old one)."""
        if shape.ndims is None:
            return
        value.shape = tuple(shape.as_list())
        self.unknown_rank.discard(value)

    def describe_tensor(self, t: Tensor, as_str: bool = False) -> str:
        """How a tensor of this graph prints, as in TF1: str() gives Tensor("add:0", shape=(?, 3), dtype=float32),
        repr() <tf.Tensor 'add:0' shape=(?, 3) dtype=float32>."""
        dtype = "string" if t._data.dtype.kind == "O" else t.dtype.name
        if as_str:
            return f'Tensor("{t.name}", shape={t.get_shape()}, dtype={dtype})'
        return f"<tf.Tensor '{t.name}' shape={t.get_shape()} dtype={dtype}>"

    @property
    def builder(self):
        """The interpreter that adds ops on this graph's tensors to it, with TF1's dtype rules (see builder.py)."""
        if self._builder is None:
            from ember.v1.builder import V1Builder

            self._builder = V1Builder(self)
        return self._builder

    def finalize(self) -> None:
        """Make the graph read-only: building another node is then an error (as in TF1)."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    # --- collections -------------------------------------------------------------------
    def add_to_collection(self, key: str, value) -> None:
        """Append a value to a named collection."""
        self.collections.setdefault(key, []).append(value)

    def get_collection(self, key: str, scope: str | None = None) -> list:
        """The values of a collection (a copy); with `scope`, those whose name matches it (re.match, as TF1)."""
        items = list(self.collections.get(key, ()))
        if scope:
            pattern = re.compile(scope)
            items = [v for v in items if isinstance(getattr(v, "name", None), str) and pattern.match(v.name)]
        return items

    def get_collection_ref(self, key: str) -> list:
        """The list stored for a collection itself (changes to it change the collection)."""
        return self.collections.setdefault(key, [])

    def get_all_collection_keys(self) -> list:
        """The names of the collections that hold something."""
        return [k for k, v in self.collections.items() if v]

    def clear_collection(self, key: str) -> None:
        """Empty a collection."""
        self.collections.pop(key, None)

    # --- naming, devices and seeds -----------------------------------------------------
    def prefixed(self, base: str) -> str:
        """`base` inside the current name scope (not made unique)."""
        return f"{self._name_stack}/{base}" if self._name_stack else base

    def scoped_name(self, base: str) -> str:
        """`base` inside the current name scope, made unique in this graph."""
        return self.unique_name(self.prefixed(base))

    def get_name_scope(self) -> str:
        """The current name scope ("" at the top level)."""
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name: str | None) -> Iterator[str]:
        """TF1's `Graph.name_scope`: a new unique scope; a name ending in "/" is taken as is; None or "" resets."""
        old = self._name_stack
        if not name:
            new, returned = "", ""
        elif name.endswith("/"):
            new, returned = name[:-1], name
        else:
            new = self.unique_name(self.prefixed(name))
            returned = new + "/"
        self._name_stack = new
        try:
            yield returned
        finally:
            self._name_stack = old

    @contextlib.contextmanager
    def absolute_scope(self, scope: str) -> Iterator[None]:
        """Build inside exactly the name scope `scope` (already made unique by the caller)."""
        old = self._name_stack
        self._name_stack = scope
        try:
            yield
        finally:
            self._name_stack = old

    def rename(self, node: ir.GNode, name: str) -> None:
        """Give `node` a name already made unique with `unique_name`."""
        if node.name is not None and self._by_name.get(node.name) is node:
            del self._by_name[node.name]
        node.name = name
        self._by_name[name] = node

    def name_node(self, node: ir.GNode, name: str | None, scoped: bool = True) -> None:
        """Give a node a unique name (inside the current name scope unless scoped=False)."""
        if name is None:
            return
        self.rename(node, self.scoped_name(name) if scoped else self.unique_name(name))

    def adopt(self, out, name: str, start: int):
        """Name `name` the node a public function made its result with; a result it did not make
        (node id < start: TF's functions also return some inputs unchanged, e.g. a cast to the same dtype) keeps
        its name."""
        from ember.dispatch import is_symbolic

        if isinstance(out, Operation):
            node = out.node
        elif isinstance(out, Tensor) and is_symbolic(out):
            node = out._data.node
        elif isinstance(out, (list, tuple)):
            nodes = {id(t._data.node): t._data.node for t in out if isinstance(t, Tensor) and is_symbolic(t)}
            node = next(iter(nodes.values())) if len(nodes) == 1 else None
        else:
            node = None
        if node is not None and node.graph is self and node.id >= start:
            self.rename(node, name)
        return out

    @property
    def device(self) -> Device:
        """The device new placeholders, constants, variables and random ops are placed on."""
        if not self._devices:
            return default_device()
        top = self._devices[-1]
        return top.op_device if isinstance(top, _DeviceFunction) else top

    def variable_device(self) -> Device | None:
        """Where a new variable goes: a device function's choice for a variable op, else None (with its value)."""
        top = self._devices[-1] if self._devices else None
        if isinstance(top, _DeviceFunction):
            return top.place("VariableV2")
        return None

    def next_seed(self, op_seed: int | None) -> int | None:
        """TF's seed rule: an op seed, or one derived from the graph seed, or None (unseeded)."""
        if op_seed is not None:
            return int(op_seed) if self.seed is None else hash((self.seed, int(op_seed))) % (2**63)
        if self.seed is None:
            return None
        self._seed_count += 1
        return hash((self.seed, self._seed_count)) % (2**63)

    # --- lookup ------------------------------------------------------------------------
    def get_operation_by_name(self, name: str) -> Operation:
        """The operation (node) called `name`; TF's KeyError if there is none."""
        try:
            return Operation(self.node(name))
        except KeyError:
            raise KeyError(f"The name {name!r} refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor called 'op_name:index'; TF's KeyError if there is none, ValueError for an operation's name."""
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            what = "refers to an Operation" if name in self._by_name else "looks like an (invalid) Operation name"
            raise ValueError(f"The name {name!r} {what}, not a Tensor. Tensor names must be of the form "
                             '"<op_name>:<output_index>".')
        if op_name not in self._by_name:
            raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. The operation, {op_name!r}, "
                           "does not exist in the graph.")
        outputs = self.get_operation_by_name(op_name).outputs
        if int(index) >= len(outputs):
            raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. The operation, {op_name!r}, "
                           f"exists but only has {len(outputs)} outputs.")
        return outputs[int(index)]

    def get_operations(self) -> list:
        """Every node as an Operation, in creation order."""
        return [Operation(n) for n in self.nodes]

    # --- defaults ----------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Make this the default graph inside a `with` block (per thread, as in TF)."""
        _stack().append(self)
        try:
            yield self
        finally:
            _stack().pop()

    def control_dependencies(self, control_inputs) -> contextlib.AbstractContextManager:
        """Nodes built inside run only after `control_inputs` (operations or tensors); None clears the
        dependencies of enclosing blocks for the nodes built inside, as in TF1."""
        if control_inputs is None:
            return self._cleared_control()
        return super().control_dependencies([as_node(c) for c in _flat(control_inputs)])

    @contextlib.contextmanager
    def _cleared_control(self) -> Iterator[None]:
        saved, self._control = self._control, []
        try:
            yield
        finally:
            self._control = saved


class Operation:
    """A graph node seen as a TF1 operation: fetchable (its value is None) and runnable."""

    __slots__ = ("node",)

    def __init__(self, node: ir.GNode) -> None:
        self.node = node

    @property
    def name(self) -> str:
        return self.node.name or f"{self.node.op_name}_{self.node.id}"

    @property
    def type(self) -> str:
        """TF1's op type ("MatMul", "Placeholder", "VariableV2", ...)."""
        return type_name(self.node.kind, self.node.op)

    @property
    def device(self) -> str:
        """The device the operation runs on, as TF writes it ("/device:CPU:0")."""
        outs = self.node.outputs
        return device_string(outs[0].device) if outs else ""

    def values(self) -> tuple:
        """The outputs, as a tuple."""
        return tuple(self.outputs)

    def get_attr(self, name: str):
        """The value of one of the node's attributes."""
        try:
            return self.node.attrs[name]
        except KeyError:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.") from None

    @property
    def graph(self) -> Graph:
        return self.node.graph

    @property
    def outputs(self) -> list:
        return [GraphTensor._make(v, v.device) for v in self.node.outputs]

    @property
    def inputs(self) -> list:
        return [GraphTensor._make(v, v.device) for v in self.node.value_inputs()]

    @property
    def control_inputs(self) -> list:
        return [Operation(n) for n in self.node.control_inputs]

    def run(self, feed_dict=None, session=None) -> None:
        """Run this operation in `session` (default: the default session)."""
        from ember.v1.session import default_session_for

        default_session_for(self.graph, session).run(self, feed_dict=feed_dict)

    def __eq__(self, other) -> bool:
        return isinstance(other, Operation) and other.node is self.node

    def __hash__(self) -> int:
        return hash(id(self.node))

    def __repr__(self) -> str:
        return f"<tf.Operation {self.name!r} type={self.type}>"


def as_node(x) -> ir.GNode:
    """The graph node behind an Operation or a symbolic tensor."""
    if isinstance(x, Operation):
        return x.node
    if isinstance(x, ir.GNode):
        return x
    data = getattr(x, "_data", None)
    if isinstance(data, ir.Value):
        return data.node
    raise TypeError(f"expected an operation or a graph tensor, got {type(x).__name__}")


# --- the default graph ----------------------------------------------------------------------
class _Defaults(threading.local):
    def __init__(self) -> None:
        self.stack: list = []


_defaults = _Defaults()
_global_graph = [Graph("default")]


def _stack() -> list:
    return _defaults.stack


def get_default_graph() -> Graph:
    """The graph new ops go into: the innermost `as_default()` of this thread, else the global one."""
    stack = _defaults.stack
    return stack[-1] if stack else _global_graph[0]


def reset_default_graph() -> None:
    """Replace the global default graph with an empty one."""
    if _defaults.stack:
        raise AssertionError("reset_default_graph: called inside a `with graph.as_default()` block")
    _global_graph[0] = Graph("default")


def get_collection(key: str, scope: str | None = None) -> list:
    """The values of a collection of the default graph (those matching `scope` when given)."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list:
    """The default graph's list for a collection itself."""
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name: str, value) -> None:
    """Append a value to a collection of the default graph."""
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value) -> None:
    """Append a value to several collections of the default graph."""
    for name in [names] if isinstance(names, str) else names:
        get_default_graph().add_to_collection(name, value)


def control_dependencies(control_inputs) -> contextlib.AbstractContextManager:
    """Context manager: ops built inside run only after `control_inputs` (on the default graph)."""
    return get_default_graph().control_dependencies(control_inputs)


def name_scope(name: str | None, default_name: str | None = None, values=None) -> contextlib.AbstractContextManager:
    """A name scope for the ops built inside: `name` (or `default_name`) made unique, yielding "scope/"."""
    graph = _graph_of(values)
    if name is None and default_name is not None:
        name = default_name
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name_scope: the name must be a string, got {type(name).__name__}")
    return graph.name_scope(name)


def get_name_scope() -> str:
    """The current name scope of the default graph."""
    return get_default_graph().get_name_scope()


def _graph_of(values) -> Graph:
    """The graph of the first graph tensor among `values`, else the default graph."""
    for v in _flat(values or ()):
        data = getattr(v, "_data", None)
        if isinstance(data, ir.Value) and isinstance(data.graph, Graph):
            return data.graph
    return get_default_graph()


def _flat(items) -> list:
    if isinstance(items, (list, tuple)):
        return [y for x in items for y in _flat(x)]
    return [] if items is None else [items]


def device_string(dev: Device) -> str:
    """A device as TF writes it: cpu:1 -> "/device:CPU:1", cuda:0 -> "/device:GPU:0"."""
    kind = {"cpu": "CPU", "cuda": "GPU"}.get(dev.type, dev.type.upper())
    return f"/device:{kind}:{dev.index or 0}"


class _OpStub:
    """What a device function is called with: an op of a type (TF passes the Operation)."""

    def __init__(self, type_: str) -> None:
        self.type = type_
        self.name = type_
        self.device = ""


class _DeviceFunction:
    """A device function scope (tf.device(replica_device_setter(...))): it chooses per op type."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.op_device = self.place("Op")

    def place(self, op_type: str) -> Device:
        return _parse_device(self.fn(_OpStub(op_type)))


@contextlib.contextmanager
def device(name) -> Iterator[None]:
    """Place the ops built inside on a device ('/cpu:1', '/gpu:0', 'cuda', '/job:ps/task:0'), or on what a
    device function chooses per op (replica_device_setter); send/recv pairs join devices and processes."""
    graph = get_default_graph()
    if callable(name) and not isinstance(name, Device):
        entry = _DeviceFunction(name)
        dev = entry.op_device
    else:
        entry = dev = _parse_device(name)
    graph._devices.append(entry)
    try:
        with dev:  # the thread's device scope is what places ops (ember.graph.build)
            yield
    finally:
        graph._devices.pop()


def _parse_device(name) -> Device:
    if name is None or isinstance(name, Device):
        return name or as_device("cpu")
    if "/job:" in str(name) or str(name).startswith("job:"):
        from ember.v1.remote import resolve_device  # devices of other processes (MPI)

        return resolve_device("/" + str(name).strip("/"))
    spec = str(name).lower().strip("/")
    spec = spec.split("/")[-1].replace("device:", "")
    if spec.startswith("gpu"):
        spec = "cuda" + spec[3:]
    return as_device(spec)


def set_random_seed(seed: int) -> None:
    """The graph-level seed: random ops without their own seed then repeat across programs."""
    get_default_graph().seed = int(seed)
