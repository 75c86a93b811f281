"""TF1's graph objects: `Graph` (with collections and a default-graph stack), `Operation`, scopes."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ember.device import Device, as_device, default_device
from ember.graph import ir
from ember.tensor import Tensor

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"


class Graph(ir.Graph):
    """An Ember graph with what TF1 programs expect of one: collections, scopes, a default device."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.collections: dict = {}
        self.gradient_records: list = []  # how each gradients() call was built (see specialize.py)
        self.seed: int | None = None  # graph-level random seed (set_random_seed)
        self._seed_count = 0
        self._scopes: list = []
        self._devices: list = []
        self._name_counts: dict = {}  # base name -> last suffix handed out

    def unique_name(self, base: str) -> str:
        """base, base_1, base_2, ... : the first not yet used (counting on from the last one given)."""
        if base not in self._by_name:
            return base
        i = self._name_counts.get(base, 0)
        while True:
            i += 1
            cand = f"{base}_{i}"
            if cand not in self._by_name:
                self._name_counts[base] = i
                return cand

    # --- collections -------------------------------------------------------------------
    def add_to_collection(self, key: str, value) -> None:
        """Append a value to a named collection."""
        self.collections.setdefault(key, []).append(value)

    def get_collection(self, key: str, scope: str | None = None) -> list:
        """The values of a collection (a copy), optionally those whose name starts with `scope`."""
        items = list(self.collections.get(key, ()))
        if scope:
            items = [v for v in items if getattr(v, "name", "").startswith(scope)]
        return items

    # --- naming, devices and seeds -----------------------------------------------------
    def scoped_name(self, base: str) -> str:
        """`base` inside the current name scopes, made unique in this graph."""
        return self.unique_name("/".join(self._scopes + [base]))

    def name_node(self, node: ir.GNode, name: str | None, scoped: bool = True) -> None:
        """Give a node a unique name (inside the current name scopes unless scoped=False)."""
        if name is None:
            return
        if node.name is not None and self._by_name.get(node.name) is node:
            del self._by_name[node.name]
        node.name = self.scoped_name(name) if scoped else self.unique_name(name)
        self._by_name[node.name] = node

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
        """The operation (node) called `name`."""
        try:
            return Operation(self.node(name))
        except KeyError:
            raise KeyError(f"the graph has no operation named {name!r}") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor called 'op_name:index'."""
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise ValueError(f"tensor names look like 'op_name:0', got {name!r}")
        outputs = self.get_operation_by_name(op_name).outputs
        if int(index) >= len(outputs):
            raise KeyError(f"operation {op_name!r} has {len(outputs)} output(s); no {name!r}")
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
        """Nodes built inside run only after `control_inputs` (operations or tensors; None: no-op)."""
        return super().control_dependencies([as_node(c) for c in control_inputs or ()])


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
        return self.node.op_name

    @property
    def graph(self) -> Graph:
        return self.node.graph

    @property
    def outputs(self) -> list:
        return [Tensor._make(v, v.device) for v in self.node.outputs]

    @property
    def inputs(self) -> list:
        return [Tensor._make(v, v.device) for v in self.node.value_inputs()]

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


def control_dependencies(control_inputs) -> contextlib.AbstractContextManager:
    """Context manager: ops built inside run only after `control_inputs` (on the default graph)."""
    return get_default_graph().control_dependencies(control_inputs)


@contextlib.contextmanager
def name_scope(name: str | None, default_name: str | None = None, values=None) -> Iterator[str]:
    """Prefix the names of placeholders, variables and named ops built inside with `name/`."""
    graph = get_default_graph()
    scope = name or default_name
    if not scope:
        yield ""
        return
    scope = scope.rstrip("/")
    graph._scopes.append(scope)
    try:
        yield "/".join(graph._scopes) + "/"
    finally:
        graph._scopes.pop()


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
        from ember.distributed.remote import resolve_device  # devices of other processes (MPI)

        return resolve_device("/" + str(name).strip("/"))
    spec = str(name).lower().strip("/")
    spec = spec.split("/")[-1].replace("device:", "")
    if spec.startswith("gpu"):
        spec = "cuda" + spec[3:]
    return as_device(spec)


def set_random_seed(seed: int) -> None:
    """The graph-level seed: random ops without their own seed then repeat across programs."""
    get_default_graph().seed = int(seed)
