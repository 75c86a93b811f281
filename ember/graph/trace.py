"""`Tracer`: the interpreter ember.jit runs a function under, and the state of one trace — the graph
being built, the outside tensors it reads and writes, and what else a compiled program depends on
(scalars read at every call, guards that decide reuse, Python side effects replayed per run).
"""

from __future__ import annotations

import weakref

import numpy as np

from ember.device import scope_depth
from ember.dispatch import is_symbolic
from ember.graph.build import GraphBuilder, concretization_error
from ember.graph.ir import Graph, Value
from ember.tensor import Tensor


class _GradRead:
    """What a trace did with one tensor's .grad: its value before the call, the alias the trace read that
    through (None until read, or when there was none), whether the traced code assigned .grad since, and
    whether its existence is guarded yet."""

    __slots__ = ("tensor", "before", "alias", "written", "guarded")

    def __init__(self, t: Tensor) -> None:
        self.tensor, self.before, self.alias, self.written, self.guarded = t, t._grad, None, False, False


class Tracer(GraphBuilder):
    """Collects a graph while a function runs on symbolic tensors: every op becomes a node, outside
    tensors are captured (read at every run) and their in-place updates become extra outputs."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph)
        self.tracer = self
        self.lifted: dict = {}  # id(tensor) -> (tensor, current Value)
        self.grad_before: dict = {}  # id(tensor) -> (tensor, its .grad when first captured)
        self.mutated: dict = {}  # id(tensor) -> tensor, for captured tensors written in place
        self.created: list = []  # weak references to the symbolic tensors made while tracing
        self.scalar_feeds: list = []  # (Value, read, NumPy dtype): fed with read() at every run
        self.guards: list = []  # (read, value at trace time): a run whose read() differs retraces
        self.grad_guards: list = []  # the same, for gradients read as they were before the call (read_grad)
        self._guard_keys: dict = {}
        self.effects: list = []  # Python side effects of the traced code, replayed after every run
        self.scope_base = scope_depth()  # device scopes opened before the trace do not place its ops
        self.grad_reads: dict = {}  # id(tensor) -> _GradRead: see read_grad

    def _grad_read(self, t: Tensor) -> _GradRead:
        rec = self.grad_reads.get(id(t))
        if rec is None or rec.tensor is not t:
            rec = self.grad_reads[id(t)] = _GradRead(t)
        return rec

    def read_grad(self, t: Tensor):
        """`t.grad` as the traced code sees it. A gradient the call found (made before it, by an eager
        backward or an earlier call) is read through an alias that the program captures and that jit points
        at t's gradient of the moment before every run: the program must not keep reading the gradient object
        it saw here, which zero_grad(set_to_none=True) and the next backward replace. Whether there was one
        decided what the trace did (accumulate or set; update or skip a parameter): a guard."""
        rec = self._grad_read(t)
        if rec.written:  # the traced code assigned t.grad since: its own value
            return t._grad
        before = rec.before
        if before is not None and is_symbolic(before):
            return before
        if not rec.guarded:
            rec.guarded = True

            def read():
                g = t._grad
                return None if g is None else (g._data.shape, g._data.dtype)

            self.grad_guards.append((read, read()))
        if before is None:
            return None
        if rec.alias is None:
            rec.alias = Tensor._make(before._data, before._device)
            rec.alias._requires_grad = before._requires_grad
        return rec.alias

    def wrote_grad(self, t: Tensor) -> None:
        """The traced code assigns t.grad: later reads see its value, not the one from before the call."""
        self._grad_read(t).written = True

    def grad_aliases(self) -> list:
        """(tensor, alias) for every gradient the program read as it was before the call."""
        return [(rec.tensor, rec.alias) for rec in self.grad_reads.values() if rec.alias is not None]

    def capture(self, t: Tensor) -> Value:
        return self.lift(t)

    def rebind(self, target: Tensor, value) -> None:
        if is_symbolic(target):
            target._data = value
        else:  # an outside tensor keeps its array; jit writes the computed values back after each run
            self.mutate(target, value)

    def read(self, tensor, what: str):
        if self.is_mutated(tensor):
            raise concretization_error(what, tensor)
        return self.below.read(tensor, what)

    def outputs(self, tensors) -> None:
        for t in tensors:
            self.track(t)

    def lift(self, t: Tensor) -> Value:
        """The graph value of an outside tensor (its latest in-trace update, if any)."""
        hit = self.lifted.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if is_symbolic(t):
            return t._data
        v = self.graph.capture(t)
        self.lifted[id(t)] = (t, v)
        self.grad_before.setdefault(id(t), (t, self._grad_read(t).before))  # before the call, not as the trace set it
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

    def keep(self, t: Tensor) -> Tensor:
        """A concrete tensor that takes symbolic `t`'s value after every run: how a value made in the
        trace is stored as state (a first momentum buffer) without escaping the trace."""
        if not is_symbolic(t):
            return t
        data = t._data
        concrete = Tensor._make(t._device.backend.from_host(np.zeros(data.shape, data.dtype)), t._device)
        self.mutate(concrete, data)
        return concrete

    def scalar_input(self, read, dtype=np.float64, device=None) -> Tensor:
        """A 0-d symbolic tensor fed with `read()` at every run (a learning rate a scheduler changes).

        Its value at trace time is kept as `trace_value` and `read` as `trace_read`, for code that
        must branch on it: such a branch has to be covered by a guard (`guard(..., key=...)`).
        """
        from ember.device import as_device

        device = as_device(device)
        value = read()
        v = self.graph.placeholder((), dtype, device, name=self.graph.unique_name("scalar"))
        self.scalar_feeds.append((v, read, np.dtype(dtype)))
        t = Tensor._make(v, device)
        t.trace_value = value
        t.trace_read = read
        return t

    def on_run(self, effect) -> None:
        """Replay a Python side effect of the traced code (a step counter) after every run."""
        self.effects.append(effect)

    def guard(self, read, key=None):
        """Read a value the program's structure depends on; the compiled program is reused only
        while `read()` returns the same (a changed value traces again). Guards with the same `key`
        are recorded once."""
        if key is not None:
            hit = self._guard_keys.get(key)
            if hit is not None:
                return hit
        value = read()
        self.guards.append((read, value))
        if key is not None:
            self._guard_keys[key] = value
        return value
