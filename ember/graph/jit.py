"""`ember.jit`: trace a Python function into a graph once per input signature, then run the graph.

Tracing calls the function with symbolic tensors. Tensors it reads from outside (parameters,
buffers, optimizer state, closure data) are captured: the graph reads them at every call. In-place
updates to them (an optimizer step, BatchNorm statistics, `x += 1`) and new `.grad` values become
extra graph outputs written back after each call, so a whole training step can be jitted.
Tensors the function creates and stores outside itself (optimizer state made on the first step)
are materialised after the call that made them, and the function is traced again on the next
call, so the compiled graph is always the program's steady state.
"""

from __future__ import annotations

import functools
import gc
import weakref

import numpy as np

from ember.device import scope_depth
from ember.errors import fmt_shape
from ember.graph.executor import Plan
from ember.graph.ir import Graph, Value
from ember.graph.passes import optimize as optimize_graph
from ember.graph.placement_exec import compile_plan
from ember.ops import dispatch
from ember.ops.dispatch import is_tracing  # noqa: F401  (re-exported as ember.is_tracing)
from ember.tensor import Tensor

_MAX_RETRACES = 4  # traces that create outside state before the program must have settled


class Tracer:
    """The state of one trace: the graph, captured tensors and their updates."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.lifted: dict = {}  # id(tensor) -> (tensor, current Value)
        self.grad_before: dict = {}  # id(tensor) -> (tensor, its .grad when first captured)
        self.mutated: dict = {}  # id(tensor) -> tensor, for captured tensors written in place
        self.created: list = []  # weak references to the symbolic tensors made while tracing
        self.scope_base = scope_depth()  # device scopes opened before the trace do not place its ops

    def lift(self, t: Tensor) -> Value:
        """The graph value of an outside tensor (its latest in-trace update, if any)."""
        hit = self.lifted.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if isinstance(t._data, Value):
            return t._data
        v = self.graph.capture(t)
        self.lifted[id(t)] = (t, v)
        self.grad_before.setdefault(id(t), (t, t.grad))
        return v

    def mutate(self, t: Tensor, value: Value) -> None:
        """Record an in-place write into an outside tensor; later reads in the trace see `value`."""
        self.lift(t)
        self.lifted[id(t)] = (t, value)
        self.mutated[id(t)] = t

    def is_mutated(self, t: Tensor) -> bool:
        """Whether an outside tensor was written in place during this trace."""
        return id(t) in self.mutated and self.mutated[id(t)] is t

    def track(self, t: Tensor) -> None:
        """Remember a symbolic tensor made during the trace (to find the ones that escape)."""
        self.created.append(weakref.ref(t))


# --- signatures -----------------------------------------------------------------------------
def _flatten(obj, leaves: list):
    """Structure of nested lists/tuples/dicts with tensors replaced by leaf positions."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, (list, tuple)):
        kind = "L" if isinstance(obj, list) else "U"
        return (kind, tuple(_flatten(x, leaves) for x in obj))
    if isinstance(obj, dict):
        return ("D", tuple((k, _flatten(v, leaves)) for k, v in obj.items()))
    return ("V", obj)


def _unflatten(struct, leaves):
    kind, payload = struct
    if kind == "T":
        return leaves[payload]
    if kind == "L":
        return [_unflatten(x, leaves) for x in payload]
    if kind == "U":
        return tuple(_unflatten(x, leaves) for x in payload)
    if kind == "D":
        return {k: _unflatten(v, leaves) for k, v in payload}
    return payload


def _static_key(value):
    try:
        hash(value)
        return ("h", value)
    except TypeError:
        return ("id", id(value))


def _struct_key(struct):
    kind, payload = struct
    if kind == "T":
        return struct
    if kind in ("L", "U"):
        return (kind, tuple(_struct_key(x) for x in payload))
    if kind == "D":
        return (kind, tuple((k, _struct_key(v)) for k, v in payload))
    return ("V", _static_key(payload))


def _modules_of(fn, args) -> list:
    """nn.Modules the function can reach directly: bound self, closure cells, arguments."""
    try:
        from ember.nn import Module
    except ImportError:  # nn not available: no modes to key on
        return []
    found = []
    roots = list(args)
    if hasattr(fn, "__self__"):
        roots.append(fn.__self__)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            roots.append(cell.cell_contents)
        except ValueError:
            continue
    for glob in getattr(fn, "__code__", None) and fn.__code__.co_names or ():
        obj = getattr(fn, "__globals__", {}).get(glob)
        if isinstance(obj, Module):
            roots.append(obj)
    for r in roots:
        if isinstance(r, Module):
            found.extend(r.modules())
    return found


class _Compiled:
    """One traced program: its plan and how to move values in and out."""

    def __init__(self) -> None:
        self.plan: Plan | None = None
        self.graph: Graph | None = None
        self.placeholders: list = []  # Value per tensor argument leaf
        self.out_struct = None
        self.n_user_outputs = 0
        self.grad_targets: list = []  # (tensor, kind) kind: "set" or "none"
        self.mutated: list = []  # tensors written back in place
        self.escaped: list = []  # weakrefs of tensors to materialise after this run
        self.retrace = False
        self.optimized: Graph | None = None  # the graph after the optimizer passes


class JitFunction:
    """A function compiled per input signature (see `jit`)."""

    def __init__(self, fn, static_argnums=(), passes=None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.passes = passes
        self._cache: dict = {}
        self._retraces: dict = {}
        self.trace_count = 0

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def _signature(self, args, kwargs, leaves):
        struct = _flatten((list(args), dict(kwargs)), leaves)
        tensor_keys = tuple(
            (tuple(t.shape), t._data.dtype.str, str(t._device), t.requires_grad) for t in leaves
        )
        modes = tuple(m.training for m in _modules_of(self.fn, args))
        from ember.grad_mode import is_grad_enabled

        return (_struct_key(struct), tensor_keys, modes, is_grad_enabled()), struct

    def __call__(self, *args, **kwargs):
        if dispatch.trace_state.hook is not None:
            return self.fn(*args, **kwargs)  # nested inside another trace: inline
        leaves: list = []
        key, struct = self._signature(args, kwargs, leaves)
        entry = self._cache.get(key)
        if entry is None or entry.retrace:
            entry = self._trace(args, kwargs, leaves, struct)
            self._cache[key] = entry
        return self._run(entry, leaves)

    def lower(self, *args, optimized: bool = False, **kwargs) -> Graph:
        """Trace for these arguments and return the graph (works with meta tensors); optimized: after the passes."""
        leaves: list = []
        _, struct = self._signature(args, kwargs, leaves)
        entry = self._trace(args, kwargs, leaves, struct, for_inspection=True, optimize=optimized)
        return entry.optimized if optimized else entry.graph

    # --- tracing ---------------------------------------------------------------------------
    def _trace(self, args, kwargs, leaves, struct, for_inspection=False, optimize=False) -> _Compiled:
        self.trace_count += 1
        graph = Graph(getattr(self.fn, "__name__", "jit"))
        tracer = Tracer(graph)
        entry = _Compiled()
        entry.graph = graph
        sym_leaves = []
        for i, t in enumerate(leaves):
            v = graph.placeholder(tuple(t.shape), t._data.dtype, t._device, name=f"arg{i}")
            s = Tensor._make(v, t._device)
            if t.requires_grad:
                s.requires_grad_(True)
            sym_leaves.append(s)
            entry.placeholders.append(v)
        sym_args, sym_kwargs = _unflatten(struct, sym_leaves)
        for i in self.static_argnums:
            sym_args[i] = args[i]
        prev = dispatch.trace_state.hook
        dispatch.trace_state.hook = tracer
        try:
            out = self.fn(*sym_args, **sym_kwargs)
        finally:
            dispatch.trace_state.hook = prev

        out_leaves: list = []
        entry.out_struct = _flatten(out, out_leaves)
        outputs = [t._data if isinstance(t._data, Value) else tracer.lift(t) for t in out_leaves]
        entry.n_user_outputs = len(outputs)
        del out, out_leaves, sym_args, sym_kwargs, sym_leaves

        # New .grad values of captured tensors become outputs; the real tensors are untouched now.
        for _tid, (t, before) in list(tracer.grad_before.items()):
            after = t.grad
            if after is before:
                continue
            t.grad = before
            if after is None:
                entry.grad_targets.append((t, "none"))
            else:
                outputs.append(after._data if isinstance(after._data, Value) else tracer.lift(after))
                entry.grad_targets.append((t, "set"))
        for t in tracer.mutated.values():
            outputs.append(tracer.lifted[id(t)][1])
            entry.mutated.append(t)

        # Symbolic tensors still alive now were stored somewhere outside the function.
        gc.collect()
        escaped = [r for r in tracer.created if r() is not None and isinstance(r()._data, Value)]
        for r in escaped:
            outputs.append(r()._data)
        entry.escaped = escaped
        if escaped and not for_inspection:
            n = self._retraces.get(id(self), 0) + 1
            self._retraces[id(self)] = n
            if n > _MAX_RETRACES:
                shapes = ", ".join(fmt_shape(r().shape) for r in escaped[:4])
                raise RuntimeError(
                    f"jit({self.__name__}): every call stores new tensors outside the function "
                    f"(shapes {shapes}); update existing tensors in place instead of rebinding them"
                )
            entry.retrace = True
        if not for_inspection or optimize:
            opt = optimize_graph(graph, outputs, self.passes)
            entry.optimized, outputs = opt.graph, opt.outputs
            entry.placeholders = [opt.value_map.get(v, v) for v in entry.placeholders]
        if not for_inspection:
            entry.plan = compile_plan(entry.optimized, outputs)  # a PlacedPlan when values span devices
        return entry

    # --- running ---------------------------------------------------------------------------
    def _run(self, entry: _Compiled, leaves):
        feeds = {v: t._data for v, t in zip(entry.placeholders, leaves)}
        results = entry.plan.run(feeds)
        k = entry.n_user_outputs
        user = [Tensor._make(r, entry.placeholders[0].device if False else _device_of(entry, i)) for i, r in
                enumerate(results[:k])]
        pos = k
        for t, kind in entry.grad_targets:
            if kind == "none":
                t.grad = None
                continue
            arr = results[pos]
            pos += 1
            if t.grad is not None and t.grad.shape == tuple(arr.shape) and t.grad._data is not arr:
                t.grad._data = arr
                t.grad._version[0] += 1
            else:
                t.grad = Tensor._make(arr, t._device)
        for t in entry.mutated:
            arr = results[pos]
            pos += 1
            np.copyto(t._data, arr, casting="unsafe") if type(t._data) is np.ndarray else t._device.backend.xp.copyto(
                t._data, arr)
            t._version[0] += 1
        for r in entry.escaped:
            arr = results[pos]
            pos += 1
            t = r()
            if t is not None:
                t._data = arr
                t._grad_fn = None
        entry.escaped = []
        return _unflatten(entry.out_struct, user)


def _device_of(entry, i):
    return entry.plan.outputs[i].device


def jit(fn=None, *, static_argnums=(), passes=None):
    """Compile `fn` by tracing it into a graph (per input signature); usable as a decorator."""
    if fn is None:
        return lambda f: JitFunction(f, static_argnums, passes)
    return JitFunction(fn, static_argnums, passes)
