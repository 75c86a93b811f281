"""`Session`: run fetches of a graph with fed values; compiled plans are cached per fetches and feeds.

A run compiles (once) the nodes its fetches need into an executor Plan. When a fed placeholder
has unknown dimensions, the needed part of the graph is first specialised to the fed shapes (see
specialize.py), so gradient nodes get concrete shapes. Plans are reentrant: several threads may
run one session at once; the plan cache is guarded by a lock.

The session owns the values of the graph's variables (`variable_values`), as in TF1: a run binds
them, so two sessions of one graph never see each other's values. Errors raised while running
are TF's (`tf.errors`): a shape or value a kernel cannot use is an InvalidArgumentError.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ember.device import as_device
from ember.errors import ShapeError, fmt_shape
from ember.graph.executor import Plan
from ember.graph.ir import PLACEHOLDER, Value
from ember.graph.placement_exec import compile_plan
from ember.ops.dispatch import is_symbolic
from ember.tensor import Tensor
from ember.v1.errors import InvalidArgumentError, OpError
from ember.v1.graph_api import Graph, Operation, get_default_graph
from ember.v1.specialize import specialize
from ember.v1.variable_values import VariableValues, bind

_MAX_PLANS = 64  # compiled plans kept per session (one per fetch/feed signature), least recent dropped


class _Compiled:
    """One compiled run: the plan, where each fetch's value comes out, and the plan's feed values."""

    __slots__ = ("plan", "out_pos", "feed_values")

    def __init__(self, plan: Plan, out_pos: list, feed_values: dict) -> None:
        self.plan = plan
        self.out_pos = out_pos  # per fetch leaf: index in plan outputs, or None for an operation
        self.feed_values = feed_values  # original fed Value -> the plan's placeholder Value


class Session:
    """Runs parts of one graph: `run(fetches, feed_dict)`; usable as a context manager."""

    def __init__(self, target: str = "", graph: Graph | None = None, config=None) -> None:
        self.graph = graph if graph is not None else get_default_graph()
        self._lock = threading.Lock()
        self._plans: OrderedDict = OrderedDict()
        self._closed = False
        self._contexts: list = []
        self.variable_values = VariableValues()

    # --- running ---------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None) -> Any:
        """Values of `fetches` (a tensor, variable, operation, name, or nested lists/tuples/dicts of them)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        leaves: list = []
        struct = _flatten(fetches, leaves)
        targets = [self._resolve_fetch(x) for x in leaves]
        feeds = self._check_feeds(feed_dict or {})
        try:
            compiled = self._compiled(targets, feeds)
        except ShapeError as e:  # the fed shapes do not fit the graph's ops
            raise InvalidArgumentError(str(e)) from e
        plan_feeds = {compiled.feed_values[v]: self._to_device(v, arr) for v, arr in feeds.items()
                      if v in compiled.feed_values}
        try:
            with bind(self.variable_values):
                arrays = compiled.plan.run(plan_feeds)
        except RuntimeError as e:
            err = _as_op_error(e)
            if err is e:
                raise
            raise err from (None if err is e.__cause__ else e.__cause__)
        results = [None if pos is None else _host(arrays[pos], t) for pos, t in zip(compiled.out_pos, targets)]
        return _unflatten(struct, results)

    def _resolve_fetch(self, x):
        """A fetch leaf as a graph Value (tensors) or GNode (operations)."""
        if isinstance(x, str):
            x = self.graph.get_tensor_by_name(x) if ":" in x else self.graph.get_operation_by_name(x)
        if isinstance(x, Operation):
            if x.node.graph is not self.graph:
                raise ValueError(f"Operation {x.name!r} is not an element of this session's graph")
            return x.node
        if isinstance(x, Tensor):
            if not is_symbolic(x):
                raise TypeError(
                    f"Fetch argument of shape {fmt_shape(x.shape)} is a concrete tensor, not a tensor of the graph"
                )
            if x._data.node.graph is not self.graph:
                raise ValueError(f"Tensor {x._data!r} is not an element of this session's graph")
            return x._data
        raise TypeError(f"Fetch argument {x!r} has invalid type {type(x).__name__}: it must be a tensor or an operation")

    def _check_feeds(self, feed_dict) -> dict:
        """Fed Values -> host arrays, checked against the fed tensor's shape and dtype and converted to it."""
        feeds = {}
        for key, value in feed_dict.items():
            v = self._feed_target(key)
            feeds[v] = check_feed(v, value)
        return feeds

    def _feed_target(self, key) -> Value:
        if isinstance(key, str):
            key = self.graph.get_tensor_by_name(key if ":" in key else key + ":0")
        if isinstance(key, Tensor) and is_symbolic(key):
            if key._data.node.graph is not self.graph:
                raise ValueError(f"feed_dict key {key._data!r} is not an element of this session's graph")
            return key._data
        raise TypeError(f"feed_dict keys must be graph tensors or their names, got {type(key).__name__}")

    @staticmethod
    def _to_device(v: Value, arr: np.ndarray):
        return arr if v.device.type == "cpu" else v.device.backend.from_host(arr)

    # --- compiling -------------------------------------------------------------------------
    def _compiled(self, targets: list, feeds: dict) -> _Compiled:
        special = any(_needs_specializing(v) for v in feeds)
        fed_key = tuple(sorted((id(v), feeds[v].shape if special else None) for v in feeds))
        key = (tuple(id(t) for t in targets), fed_key)
        with self._lock:
            hit = self._plans.get(key)
            if hit is not None:
                self._plans.move_to_end(key)
                return hit
            compiled = self._compile(targets, feeds, special)
            self._plans[key] = compiled
            if len(self._plans) > _MAX_PLANS:
                self._plans.popitem(last=False)
            return compiled

    def _compile(self, targets: list, feeds: dict, special: bool) -> _Compiled:
        values = list(dict.fromkeys(t for t in targets if isinstance(t, Value)))
        nodes = list(dict.fromkeys(t for t in targets if not isinstance(t, Value)))
        if special:
            spec = specialize(self.graph, values, nodes, {v: arr.shape for v, arr in feeds.items()})
            plan = compile_plan(spec.graph, [spec.value(v) for v in values], [spec.node(n) for n in nodes])
            feed_values = {v: spec.value(v) for v in feeds}
        else:
            plan = compile_plan(self.graph, values, nodes)  # a PlacedPlan when values span devices
            feed_values = {v: v for v in feeds if v.node.kind == PLACEHOLDER}
        cpu = as_device("cpu").backend
        for step in plan.steps:
            if step.backend is None:  # nodes without outputs (no_op, group) have no device: run them on the host
                step.backend = cpu
        index = {v: i for i, v in enumerate(values)}
        out_pos = [index[t] if isinstance(t, Value) else None for t in targets]
        return _Compiled(plan, out_pos, feed_values)

    # --- lifetime and defaults ----------------------------------------------------------
    def close(self) -> None:
        """Release the compiled plans and the variables' values; the session cannot run afterwards."""
        self._closed = True
        with self._lock:
            self._plans.clear()
        self.variable_values.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Session]:
        """Make this the default session (for eval() and run()) inside a `with` block."""
        _sessions().append(self)
        try:
            yield self
        finally:
            _sessions().pop()

    def __enter__(self) -> Session:
        stack = contextlib.ExitStack()
        stack.enter_context(self.graph.as_default())
        stack.enter_context(self.as_default())
        self._contexts.append(stack)
        return self

    def __exit__(self, *exc) -> None:
        self._contexts.pop().close()
        self.close()


class InteractiveSession(Session):
    """A session that makes itself the default one when created (for shells and notebooks)."""

    def __init__(self, target: str = "", graph: Graph | None = None, config=None) -> None:
        super().__init__(target, graph, config)
        _sessions().append(self)

    def close(self) -> None:
        """Close and stop being the default session."""
        stack = _sessions()
        if self in stack:
            stack.remove(self)
        super().close()


def _as_op_error(e: RuntimeError) -> Exception:
    """The error a failed run raises: TF's own errors show through the executor's wrapping; a kernel that
    could not use its inputs (shape, index, type or value errors) is an InvalidArgumentError naming the op."""
    cause = e.__cause__
    if isinstance(cause, OpError):
        return cause
    if isinstance(cause, (ValueError, IndexError, TypeError)):
        return InvalidArgumentError(str(e))
    return e


# --- feeds ----------------------------------------------------------------------------------
def _display_name(v: Value) -> str:
    return v.node.name or f"%{v.node.id}"


def _declared_shape(v: Value):
    """The shape a fed value must match (None: any rank)."""
    if v.node.kind == PLACEHOLDER:
        shape = v.node.attrs["shape"]
        return None if shape is None else tuple(None if d is None or d == -1 else int(d) for d in shape)
    return tuple(v.shape)


def _needs_specializing(v: Value) -> bool:
    shape = _declared_shape(v)
    return v.node.kind != PLACEHOLDER or shape is None or None in shape


def check_feed(v: Value, value) -> np.ndarray:
    """A fed value as a host array of v's dtype; a ValueError naming v if the shape or dtype does not fit."""
    arr = np.asarray(value.detach() if isinstance(value, Tensor) else value)
    want = v.dtype
    what = "placeholder" if v.node.kind == PLACEHOLDER else "tensor"
    if arr.dtype != want and (arr.dtype.kind in "OUSV" or not np.can_cast(arr.dtype, want, casting="same_kind")):
        raise InvalidArgumentError(
            f"Cannot feed value of dtype {arr.dtype.name} for {what} {_display_name(v)!r} of dtype {want.name}: "
            f"it cannot be converted safely"
        )
    shape = _declared_shape(v)
    if shape is not None and (
        len(arr.shape) != len(shape) or any(d is not None and d != a for d, a in zip(shape, arr.shape))
    ):
        raise InvalidArgumentError(
            f"Cannot feed value of shape {fmt_shape(arr.shape)} for {what} {_display_name(v)!r}, which has shape "
            f"{fmt_shape(shape)}"
        )
    return np.asarray(arr, dtype=want, order="C")


# --- fetch structures ---------------------------------------------------------------------------
def _flatten(obj, leaves: list):
    if isinstance(obj, (Tensor, Operation, str)):
        leaves.append(obj)
        return ("leaf", len(leaves) - 1)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("namedtuple", type(obj), [_flatten(x, leaves) for x in obj])
    if isinstance(obj, (list, tuple)):
        return ("seq", type(obj), [_flatten(x, leaves) for x in obj])
    if isinstance(obj, dict):
        return ("dict", type(obj), [(k, _flatten(x, leaves)) for k, x in obj.items()])
    raise TypeError(f"Fetch argument {obj!r} has invalid type {type(obj).__name__}")


def _unflatten(struct, results):
    kind = struct[0]
    if kind == "leaf":
        return results[struct[1]]
    if kind == "namedtuple":
        return struct[1](*[_unflatten(s, results) for s in struct[2]])
    if kind == "seq":
        items = [_unflatten(s, results) for s in struct[2]]
        return items if struct[1] is list else struct[1](items)
    out = struct[1]()
    for k, s in struct[2]:
        out[k] = _unflatten(s, results)
    return out


def _host(arr, v: Value):
    """A fetched value as NumPy data the caller owns (a NumPy scalar for 0-d results, as TF)."""
    if v.device.type == "cpu":
        out = np.array(arr, copy=True)  # it may be variable storage, a constant or a view of one
    else:
        out = v.device.backend.to_host(arr)
    return out[()] if out.ndim == 0 else out


# --- default sessions ---------------------------------------------------------------------------
class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list = []


_local = _Local()


def _sessions() -> list:
    return _local.stack


def get_default_session() -> Session | None:
    """The innermost default session of this thread (None without one)."""
    stack = _local.stack
    return stack[-1] if stack else None


def default_session_for(graph, session: Session | None = None) -> Session:
    """`session`, or the default session; an error if there is none or it runs another graph."""
    sess = session if session is not None else get_default_session()
    if sess is None:
        raise ValueError(
            "Cannot evaluate tensor using `eval()`: No default session is registered. Use `with sess.as_default()` "
            "or pass an explicit session to `eval(session=sess)`"
        )
    if sess.graph is not graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph is different from the "
                         "session's graph.")
    return sess


def evaluate(t: Tensor, feed_dict=None, session: Session | None = None):
    """The value of graph tensor `t` in `session` (default: the default session): `Tensor.eval`."""
    if not is_symbolic(t):
        raise TypeError("eval(): this tensor is concrete, not a graph tensor; use .numpy()")
    return default_session_for(t._data.graph, session).run(t, feed_dict=feed_dict)
