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
from ember.dispatch import is_symbolic
from ember.errors import ShapeError, fmt_shape
from ember.graph.executor import Plan, UnfedPlaceholderError
from ember.graph.ir import PLACEHOLDER, Value
from ember.graph.placement_exec import compile_plan
from ember.tensor import Tensor
from ember.v1.errors import InvalidArgumentError, OpError
from ember.v1.graph_api import Graph, Operation, get_default_graph
from ember.v1.specialize import specialize
from ember.v1.tensor_shape import TensorShape
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
            raise InvalidArgumentError(None, *_located(self.graph, getattr(e, "node", None), str(e))) from e
        plan_feeds = {compiled.feed_values[v]: self._to_device(v, arr) for v, arr in feeds.items()
                      if v in compiled.feed_values}
        try:
            with bind(self.variable_values):
                arrays = compiled.plan.run(plan_feeds)
        except UnfedPlaceholderError as e:
            raise unfed_placeholder_error(self.graph, e.value) from None
        except RuntimeError as e:
            err = as_op_error(self.graph, e)
            if err is e:
                raise
            raise err from (None if err is e.__cause__ else e.__cause__)
        results = [None if pos is None else _host(arrays[pos], t) for pos, t in zip(compiled.out_pos, targets)]
        return _unflatten(struct, results)

    def _resolve_fetch(self, x):
        """A fetch leaf as a graph Value (tensors) or GNode (operations); TF's errors for what is not one."""
        if isinstance(x, str):
            try:
                x = self.graph.get_tensor_by_name(x) if ":" in x else self.graph.get_operation_by_name(x)
            except (KeyError, ValueError) as e:
                raise ValueError(f"Fetch argument {x!r} cannot be interpreted as a Tensor. ({_reason(e)})") from None
        if isinstance(x, Operation):
            if x.node.graph is not self.graph:
                raise ValueError(f"Fetch argument {x!r} cannot be interpreted as a Tensor. (Operation {x.name!r} is "
                                 "not an element of this graph.)")
            return x.node
        if isinstance(x, Tensor):
            if not is_symbolic(x):
                raise TypeError(
                    f"Fetch argument of shape {fmt_shape(x.shape)} is a concrete tensor, not a tensor of the graph"
                )
            if x._data.node.graph is not self.graph:
                raise ValueError(f"Fetch argument {x!r} cannot be interpreted as a Tensor. (Tensor {x} is not an "
                                 "element of this graph.)")
            return x._data
        raise TypeError(f"Fetch argument {x!r} has invalid type {type(x)!r}, must be a string or Tensor. (Can not "
                        f"convert a {type(x).__name__} into a Tensor or Operation.)")

    def _check_feeds(self, feed_dict) -> dict:
        """Fed Values -> host arrays, checked against the fed tensor's static shape and cast to its dtype."""
        feeds = {}
        for key, value in feed_dict.items():
            v = self._feed_target(key)
            feeds[v] = check_feed(v, value, key)
        return feeds

    def _feed_target(self, key) -> Value:
        """The graph Value a feed_dict key names; TF's TypeError for a key that is not a tensor of this graph."""
        if isinstance(key, str):
            try:  # TF wants "name:0"; an operation's name is taken to mean its first output
                key = self.graph.get_tensor_by_name(key if ":" in key else key + ":0")
            except (KeyError, ValueError) as e:
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {_reason(e)}") from None
        if isinstance(key, Tensor) and is_symbolic(key):
            if key._data.node.graph is not self.graph:
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: Tensor {key} is not an element of this "
                                "graph.")
            return key._data
        raise TypeError(f"Cannot interpret feed_dict key as Tensor: Can not convert a {type(key).__name__} into a "
                        "Tensor.")

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


def _reason(e: Exception) -> str:
    """An exception's message without the quotes KeyError puts around it."""
    return str(e.args[0]) if e.args else str(e)


def _users_node(graph, node):
    """The node of the user's graph a run's node stands for (runs may use a specialised copy of the graph)."""
    if node is None or node.name is None:
        return node
    return graph._by_name.get(node.name, node)


def as_op_error(graph, e: RuntimeError) -> Exception:
    """The error a failed run raises, as TF raises it: the message, then the node it came from ("[[node name]]").

    TF's own errors (raised by Ember's TF kernels) show through the executor's wrapping; an integer division
    by zero, and a kernel that could not use its inputs (shape, index, type or value errors), are
    InvalidArgumentErrors. Anything else is Ember's own error, raised as it is.
    """
    cause = e.__cause__
    node = getattr(e, "node", None)
    if isinstance(cause, OpError):
        op, message = _located(graph, node, cause.message)
        return type(cause)(cause.node_def, cause.op or op, message)
    if isinstance(cause, ZeroDivisionError):
        return InvalidArgumentError(None, *_located(graph, node, "Integer division by zero"))
    if isinstance(cause, (ValueError, IndexError, TypeError)):
        return InvalidArgumentError(None, *_located(graph, node, str(cause)))
    return e


def _located(graph, node, message: str) -> tuple:
    """(the Operation of `node` in the user's graph, or None; `message` with the node appended as TF appends it)."""
    node = _users_node(graph, node)
    if node is None:
        return None, message
    op = Operation(node)
    return op, f"{message}\n\t [[node {op.name}]]"


def unfed_placeholder_error(graph, value: Value) -> InvalidArgumentError:
    """TF's error for a placeholder a run needs and no value was fed for, naming it, its dtype and its shape."""
    node = _users_node(graph, value.node)
    placeholder = node.outputs[0] if node.outputs else value
    message = f"You must feed a value for placeholder tensor '{node.name}' with dtype {tf_dtype_name(value.dtype)}"
    if placeholder not in getattr(graph, "unknown_rank", ()):
        dims = ",".join("?" if d is None else str(d) for d in placeholder.shape)
        message += f" and shape [{dims}]"
    return InvalidArgumentError(None, Operation(node), f"{message}\n\t [[node {node.name}]]")


# --- feeds ----------------------------------------------------------------------------------
def _static_shape(v: Value):
    """The static shape a fed value must fit (None: any rank), as `tensor.get_shape()` gives it."""
    return None if v in getattr(v.graph, "unknown_rank", ()) else tuple(v.shape)


def _needs_specializing(v: Value) -> bool:
    shape = _static_shape(v)
    declared_unknown = v.node.kind == PLACEHOLDER and v.node.attrs["shape"] is None
    return v.node.kind != PLACEHOLDER or declared_unknown or shape is None or None in shape


def check_feed(v: Value, value, key=None) -> np.ndarray:
    """A fed value as a host array of v's dtype, cast as TF casts feeds; TF's errors where it does not fit.

    As TF's Session does, the value is cast to the tensor's dtype (Python floats into float32, ints
    into a float tensor, float64 arrays into float32) and its shape checked against the tensor's
    static shape (a ValueError). Where the cast would change a value (a float that is not a whole
    number into an integer tensor, an integer out of the dtype's range, a number other than 0 and 1
    into a bool tensor) it is a TypeError: TF truncates or wraps such values silently.
    """
    name = f"{v.node.name or f'%{v.node.id}'}:{v.index}"
    if isinstance(value, Tensor) and is_symbolic(value):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. Acceptable feed values include Python scalars, "
            f"strings, lists, numpy ndarrays, or TensorHandles. For reference, the tensor object was {value} which "
            f"was passed to the feed with key {key if key is not None else name}."
        )
    arr = cast_feed(value.detach() if isinstance(value, Tensor) else value, v.dtype, name)
    shape = _static_shape(v)
    if shape is not None and (
        len(arr.shape) != len(shape) or any(d is not None and d != a for d, a in zip(shape, arr.shape))
    ):
        static = str(TensorShape(shape))
        raise ValueError(f"Cannot feed value of shape {arr.shape!r} for Tensor {name!r}, which has shape {static!r}")
    return arr


def cast_feed(value, want: np.dtype, name: str) -> np.ndarray:
    """`value` as a C-ordered array of dtype `want` (see check_feed for what is refused)."""
    try:
        arr = np.asarray(value)
        if arr.dtype.kind in "OUSV":  # text or ragged data: NumPy's own conversion, as TF's Session does
            return np.asarray(arr, dtype=want, order="C")
    except (TypeError, ValueError) as e:
        raise ValueError(f"Cannot feed value {_short(value)} for Tensor {name!r} of dtype "
                         f"{tf_dtype_name(want)}: {e}") from None
    if arr.dtype != want:
        lost = _lost_value(arr, want)
        if lost is not None:
            raise TypeError(
                f"Type of feed value {lost!r} (in an array of dtype {arr.dtype.name}) is not compatible with Tensor "
                f"{name!r} of dtype {tf_dtype_name(want)}: the cast would change it (TF truncates or wraps it "
                f"silently); convert the data to {want.name} first if that is what you mean"
            )
    return np.asarray(arr, dtype=want, order="C")


def _lost_value(arr: np.ndarray, want: np.dtype):
    """The first value of `arr` that casting to `want` would change (not merely round), else None."""
    if want.kind == "b":
        bad = (arr != 0) & (arr != 1)
    elif want.kind in "iu" and arr.dtype.kind == "f":
        info = np.iinfo(want)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.trunc(arr)) | (arr < info.min) | (arr > info.max)
    elif want.kind in "iu" and arr.dtype.kind in "iu":
        info = np.iinfo(want)
        bad = (arr < info.min) | (arr > info.max)
    else:  # into floats (rounded, as TF does) or from bools (0 and 1 fit anything)
        return None
    if not np.any(bad):
        return None
    return np.asarray(arr)[np.asarray(bad)].reshape(-1)[0].item()


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_TF_DTYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "object": "string"}


def tf_dtype_name(dtype) -> str:
    """A dtype as TF's messages name it (float32 is "float", float64 "double")."""
    name = np.dtype(dtype).name
    return _TF_DTYPE_NAMES.get(name, name)


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
