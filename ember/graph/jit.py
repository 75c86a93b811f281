"""`ember.jit`: trace a Python function into a graph once per input signature, then run the graph.

Tracing calls the function with symbolic tensors. Tensors it reads from outside (parameters,
buffers, optimizer state, closure data) are captured: the graph reads them at every call. In-place
updates to them (an optimizer step, BatchNorm statistics, `x += 1`) and new `.grad` values become
extra graph outputs written back after each call, so a whole training step can be jitted.

What a compiled program depends on, and how each is handled (docs/architecture.md, "What jit reads"):
- tensors and NumPy arrays among the arguments: graph inputs, keyed by shape and dtype;
- other arguments, the Python scalars of reachable modules (`training`, `p`, `eps`, ...), which
  parameters, buffers, tensor and function attributes, children and hooks they hold, and the scalars,
  tensors and functions the function (its comprehensions, lambdas and inner functions too) reads from its
  closure and globals (objects by identity): part of the cache key (a change retraces);
- optimizer hyperparameters (every number in `param_groups`, which schedulers change): graph
  inputs read at every call; their zero-ness and the boolean options are guards (a change retraces).

A call whose function raises an error it would raise eagerly (not one tracing alone causes, such as reading a
symbolic value in Python) leaves the state eager code leaves: what ran before the error (a batch norm's
counter, a parameter update, new gradients) is run as a program once, then the error is raised; nothing is
cached.

Optimizers create their state outside the trace (as concrete tensors the graph captures), so the
first trace of a training step is already its steady state. Entries are kept in a bounded LRU
cache, and a function traced more often than the cache holds gets one warning naming what changed.
"""

from __future__ import annotations

import functools
import gc
import traceback
import warnings
from collections import OrderedDict

import numpy as np

from ember import dispatch
from ember.dispatch import is_symbolic, is_tracing  # noqa: F401  (is_tracing: re-exported as ember.is_tracing)
from ember.errors import ConcretizationError, DataDependentError, fmt_shape
from ember.graph.executor import Plan
from ember.graph.ir import Graph
from ember.graph.jit_dynamic import SIZE, DynamicProgram, batch_leaves, generalise, size_of
from ember.graph.jit_key import flatten, signature, unflatten
from ember.graph.passes import optimize as optimize_graph
from ember.graph.placement_exec import compile_plan
from ember.graph.trace import Tracer
from ember.symbolic import SymInt, collecting_guards
from ember.tensor import Tensor

DEFAULT_CACHE_SIZE = 8  # compiled programs kept per function (torch.compile's cache_size_limit)
_MAX_RETRACES = 4  # traces that create outside state before the program must have settled


# Programs kept for one signature whose gradient guards differ (see __call__)
_PROGRAMS_PER_KEY = 4


def _hold(guards: list) -> bool:
    for read, value in guards:
        try:
            now = read()
        except Exception:  # noqa: BLE001 - the state it read is gone: retrace
            return False
        if now != value or type(now) is not type(value):
            return False
    return True


class _Compiled:
    """One traced program: its plan and how to move values in and out."""

    def __init__(self) -> None:
        self.plan: Plan | None = None
        self.graph: Graph | None = None
        self.placeholders: list = []  # Value per argument leaf (tensor or array)
        self.scalar_feeds: list = []  # (Value, read, dtype), fed with read() at every call
        self.guards: list = []  # (read, value): this program is valid while read() == value
        self.grad_guards: list = []  # the same for whether (and as what) gradients existed before the call
        self.effects: list = []  # Python side effects of the traced code, replayed after every run
        self.out_struct = None
        self.n_user_outputs = 0
        self.grad_targets: list = []  # (tensor, kind) kind: "set" or "none"
        self.grad_aliases: list = []  # (tensor, alias): the alias, captured, is pointed at tensor.grad per run
        self.mutated: list = []  # tensors written back in place
        self.arg_writes: list = []  # indices of tensor arguments the function writes in place (copied back)
        self.copied_back = 0  # of them, how many the last run copied (the rest were computed into their arrays)
        self.escaped: list = []  # weakrefs of tensors to materialise after this run
        self.retrace = False
        self.optimized: Graph | None = None  # the graph after the optimizer passes
        self.eager = False  # (eager_fallback) calls with this signature run the function eagerly
        self.failure: BaseException | None = None  # the error the traced function raised (never cached)

    def guards_hold(self) -> bool:
        """Whether every guard still reads the value it had at trace time."""
        return _hold(self.guards) and _hold(self.grad_guards)

    def may_hold_again(self) -> bool:
        """Whether this program may be the right one for a later call: its guards other than the gradients'
        hold (an option or state that changed rarely changes back; gradients come and go every call under
        gradient accumulation)."""
        return _hold(self.guards)


class JitFunction:
    """A function compiled per input signature (see `jit`)."""

    def __init__(self, fn, static_argnums=(), passes=None, cache_size: int = DEFAULT_CACHE_SIZE,
                 dynamic: bool | None = None, eager_fallback: bool = False) -> None:
        functools.update_wrapper(self, fn)
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"jit: cache_size must be a positive int, got {cache_size!r}")
        if dynamic not in (None, False):
            raise ValueError(f"jit: dynamic must be None (a varying batch size is detected) or False, got {dynamic!r}")
        self.fn = fn
        self.dynamic = dynamic
        self._programs: OrderedDict = OrderedDict()  # generalised key -> DynamicProgram
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.passes = passes
        self.cache_size = cache_size
        # ember.compile's rule: a signature whose trace needs Python values of tensors, or whose results
        # carry autograd history the function does not backpropagate itself, runs eagerly instead.
        self.eager_fallback = eager_fallback
        self._cache: OrderedDict = OrderedDict()  # key -> [_Compiled], least recently used first
        self._retraces = 0
        self._warned = False
        self.trace_count = 0
        self._module_keys = [None]  # the reachable modules' keys last read (jit_key.module_keys)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args, **kwargs):
        if dispatch.is_tracing():
            return self.fn(*args, **kwargs)  # nested inside another trace: inline
        key, struct, leaves = signature(self.fn, args, kwargs, self.static_argnums, self._module_keys)
        entries = self._cache.get(key)
        entry = None
        if entries is not None:
            self._cache.move_to_end(key)
            entry = next((e for e in entries if e.guards_hold()), None)
        if entry is None:
            if entries is not None:
                # Same signature, but a guarded value changed: programs traced under an old optimizer option or
                # before state existed are dropped; those that differ only in which gradients existed before
                # the call are kept (a few), since gradient accumulation alternates between the two every call.
                entries[:] = [e for e in entries if e.may_hold_again()]
            else:
                ran = self._run_dynamic(key, args, kwargs, leaves, struct)
                if ran is not None:
                    return ran[0]
            entry = self._trace_to_store(args, kwargs, leaves, struct)
            self._store(key, entry)
        elif entry.retrace:
            entries.remove(entry)
            entry = self._trace_to_store(args, kwargs, leaves, struct)
            self._store(key, entry)
        if entry.eager:
            return self.fn(*args, **kwargs)
        return self._run(entry, leaves)

    def _trace_to_store(self, args, kwargs, leaves, struct) -> _Compiled:
        """A program for this call; when the function raised, what it did before the error is run and the
        error raised (nothing is cached: the next call traces again)."""
        entry = self._trace(args, kwargs, leaves, struct)
        if entry.failure is not None:
            failure, entry.failure = entry.failure, None
            self._run(entry, leaves)  # an error here came first in the function, and is raised instead, as eagerly
            raise failure
        return entry

    def entries(self) -> list:
        """The compiled programs in the cache, least recently used first."""
        return [e for entries in self._cache.values() for e in entries]

    def lower(self, *args, optimized: bool = False, **kwargs) -> Graph:
        """Trace for these arguments and return the graph (works with meta tensors); optimized: after the passes."""
        _, struct, leaves = signature(self.fn, args, kwargs, self.static_argnums)
        entry = self._trace(args, kwargs, leaves, struct, for_inspection=True, optimize=optimized)
        return entry.optimized if optimized else entry.graph

    # --- dynamic batch sizes (ember.graph.jit_dynamic) ----------------------------------------
    def _run_dynamic(self, key, args, kwargs, leaves, struct):
        """Run a call whose key is new through a program with a symbolic batch size: an existing
        one, or one traced now when the key differs from a cached one in the batch size alone.
        Returns (result,) or None (trace a static program instead)."""
        if self.dynamic is False:
            return None
        for gkey, program in reversed(self._programs.items()):
            if generalise(key, program.leaves) == gkey and program.entry.guards_hold():
                plan = program.plan_for(size_of(key, program.leaves))
                if plan is not None:
                    self._programs.move_to_end(gkey)
                    return (self._run(program.entry, leaves, plan),)
        for old in reversed(self._cache):
            batch = batch_leaves(old, key)
            if batch is not None and generalise(key, batch) not in self._programs:
                program = self._trace_dynamic(args, kwargs, leaves, struct, batch)
                if program is None:
                    return None
                self._programs[generalise(key, batch)] = program
                while len(self._programs) > self.cache_size:
                    self._programs.popitem(last=False)
                plan = program.plan_for(size_of(key, batch))
                return None if plan is None else (self._run(program.entry, leaves, plan),)
        return None

    def _trace_dynamic(self, args, kwargs, leaves, struct, batch):
        """A program traced with the first dimension of the `batch` leaves symbolic (None if that fails)."""
        with collecting_guards() as guards:
            try:
                entry = self._trace(args, kwargs, leaves, struct, symbolic_leaves=batch)
            except Exception:  # noqa: BLE001 - user code that needs a concrete size: a static trace then
                self.trace_count -= 1
                return None
        if entry.retrace or not isinstance(entry.plan, Plan):
            return None
        return DynamicProgram(entry, batch, guards)

    # --- the cache -------------------------------------------------------------------------
    def _store(self, key, entry: _Compiled) -> None:
        previous = next(reversed(self._cache), None) if self._cache else None
        same_key = self._cache.setdefault(key, [])
        same_key.append(entry)
        if len(same_key) > _PROGRAMS_PER_KEY:
            same_key.pop(0)
        self._cache.move_to_end(key)
        while sum(len(v) for v in self._cache.values()) > self.cache_size:
            oldest = next(iter(self._cache))
            self._cache[oldest].pop(0)
            if not self._cache[oldest]:
                del self._cache[oldest]
        if self.trace_count > self.cache_size and not self._warned:
            self._warned = True
            reason = _what_changed(previous, key) if previous is not None and previous != key else (
                "an optimizer option or a guarded value changed")
            warnings.warn(
                f"jit({self.__name__}) has been traced {self.trace_count} times (cache size {self.cache_size}); "
                f"last change: {reason}. Each new signature is traced anew: pass values that change between "
                "calls as tensors, or raise cache_size.",
                RuntimeWarning, stacklevel=3,
            )

    # --- tracing ---------------------------------------------------------------------------
    def _trace(self, args, kwargs, leaves, struct, for_inspection=False, optimize=False,
               symbolic_leaves=()) -> _Compiled:
        self.trace_count += 1
        graph = Graph(getattr(self.fn, "__name__", "jit"))
        tracer = Tracer(graph)
        entry = _Compiled()
        entry.graph = graph
        sym_leaves = []
        for i, x in enumerate(leaves):
            device = x._device if isinstance(x, Tensor) else _cpu()
            shape = tuple(x.shape)
            if i in symbolic_leaves:
                shape = (SymInt(shape[0], SIZE),) + shape[1:]
            v = graph.placeholder(shape, x.dtype if not isinstance(x, Tensor) else x._data.dtype, device,
                                  name=f"arg{i}")
            s = Tensor._make(v, device)
            if isinstance(x, Tensor) and x.requires_grad:
                s.requires_grad_(True)
            sym_leaves.append(s)
            entry.placeholders.append(v)
        sym_args, sym_kwargs = unflatten(struct, sym_leaves)
        failure = None
        result = [None]  # emptied by _finish_trace: no frame but its own may hold the outputs (see _escaped)
        with tracer:
            try:
                result[0] = self.fn(*sym_args, **sym_kwargs)
            except BaseException as e:
                if self.eager_fallback and isinstance(e, ConcretizationError):
                    _restore_grads(tracer)  # a failed trace leaves no symbolic .grad on real tensors
                    traceback.clear_frames(e.__traceback__)  # their locals are not state kept outside
                    if not _escaped(tracer):
                        entry.eager = True
                        return entry
                    raise
                if for_inspection or symbolic_leaves or not _raised_as_eagerly(e):
                    _restore_grads(tracer)
                    raise
                failure = e
        del sym_args, sym_kwargs
        if failure is None:
            return self._finish_trace(entry, tracer, result, leaves, sym_leaves, for_inspection, optimize)
        # The function raised, as it would have eagerly, after changing state (a batch norm's counter, a
        # parameter, .grad): the program of what ran before the error is run once, then the error raised.
        try:
            entry = self._finish_trace(entry, tracer, result, leaves, sym_leaves, failed=True)
        except Exception:  # noqa: BLE001 - what came before the error cannot be run: the error is the news
            _restore_grads(tracer)
            raise failure from None
        entry.failure = failure
        return entry

    def _finish_trace(self, entry: _Compiled, tracer: Tracer, result: list, leaves, sym_leaves,
                      for_inspection=False, optimize=False, failed=False) -> _Compiled:
        """Make `entry`'s program from a trace that ran to its end, `result` holding what the function returned
        (or, `failed`, to an error: a program of the state changes that came before it)."""
        graph = entry.graph
        out = result.pop()
        out_leaves: list = []
        entry.out_struct = flatten(out, out_leaves)
        if not all(isinstance(x, Tensor) for x in out_leaves):  # an array argument returned as it is
            raise TypeError(f"jit({self.__name__}): returning a NumPy array argument as it is is not "
                            "supported; return a tensor")
        outputs = [t._data if is_symbolic(t) else tracer.lift(t) for t in out_leaves]
        entry.n_user_outputs = len(outputs)
        differentiable = any(t.requires_grad for t in out_leaves)
        # Tensor arguments the function wrote in place (p.add_(g)) now stand for a new value: it is an
        # output too, copied into the caller's tensor after each run, as eager and torch.compile leave it.
        arg_values = [(i, s._data) for i, (x, s) in enumerate(zip(leaves, sym_leaves))
                      if isinstance(x, Tensor) and s._data is not entry.placeholders[i]]
        del out, out_leaves, sym_leaves

        # New .grad values of captured tensors become outputs; the real tensors are untouched now.
        for _tid, (t, before) in list(tracer.grad_before.items()):
            after = t.grad
            if after is before:
                continue
            t.grad = before
            if after is None:
                entry.grad_targets.append((t, "none"))
            else:
                outputs.append(after._data if is_symbolic(after) else tracer.lift(after))
                entry.grad_targets.append((t, "set"))
        after = None  # the last new gradient, still named here, would count as a tensor kept outside (_escaped)
        if (self.eager_fallback and differentiable and not entry.grad_targets and not for_inspection
                and not _escaped(tracer)):
            entry.eager = True  # the caller will backpropagate the results: run eagerly, with autograd
            return entry
        for t in tracer.mutated.values():
            outputs.append(tracer.lifted[id(t)][1])
            entry.mutated.append(t)
        for i, value in arg_values:  # a write while tracing always binds a graph value (GraphBuilder.write)
            outputs.append(value)
            entry.arg_writes.append(i)
        entry.scalar_feeds = tracer.scalar_feeds
        # Whether a captured tensor requires grad decided what the trace differentiated (freezing a layer,
        # p.requires_grad_(False), must retrace, not keep updating it), and its shape, dtype and device what
        # the program computes and where (`p.data = ...` and `module.to(...)` change them): guards.
        captured = [t for t, _ in tracer.lifted.values()]

        def captured_state():
            return [(t._requires_grad, t._data.shape, t._data.dtype, t._device) for t in captured]

        entry.guards = tracer.guards + [(captured_state, captured_state())]
        entry.grad_guards = tracer.grad_guards
        entry.grad_aliases = tracer.grad_aliases()
        entry.effects = tracer.effects

        escaped = _escaped(tracer)
        for r in escaped:
            outputs.append(r()._data)
        entry.escaped = escaped
        if escaped and not for_inspection and not failed:
            # Tensors made inside the function and kept outside it (state a later call creates): they
            # are materialised after this run and the steady state is traced on the next call.
            self._retraces += 1
            if self._retraces > _MAX_RETRACES:
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
            entry.scalar_feeds = [(opt.value_map.get(v, v), read, dt) for v, read, dt in entry.scalar_feeds]
        if not for_inspection:
            entry.plan = compile_plan(entry.optimized, outputs)  # a PlacedPlan when values span devices
        return entry

    # --- running ---------------------------------------------------------------------------
    def _run(self, entry: _Compiled, leaves, plan=None):
        for t, alias in entry.grad_aliases:  # gradients as they are now (a guard saw that they exist)
            alias._data = t._grad._data
        feeds = {v: (x._data if isinstance(x, Tensor) else x) for v, x in zip(entry.placeholders, leaves)}
        for v, read, dtype in entry.scalar_feeds:
            value = np.asarray(read(), dtype=dtype)
            feeds[v] = value if v.device.type == "cpu" else v.device.backend.from_host(value)
        plan = plan if plan is not None else entry.plan
        if entry.mutated and isinstance(plan, Plan):
            # updated weights and optimizer state are computed straight into their tensors where safe
            first = entry.n_user_outputs + sum(kind == "set" for _, kind in entry.grad_targets)
            into = {first + n: (t._data, t) for n, t in enumerate(entry.mutated)}
            results = plan.run(feeds, into=into)
        else:
            results = plan.run(feeds)
        k = entry.n_user_outputs
        user = [Tensor._make(r, plan.outputs[i].device) for i, r in enumerate(results[:k])]
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
        copied = 0
        for t in entry.mutated:
            arr = results[pos]
            pos += 1
            if arr is not t._data:
                t._device.backend.xp.copyto(t._data, arr, casting="unsafe")
                copied += 1
            t._version[0] += 1
        entry.copied_back = copied
        for i in entry.arg_writes:
            arr, t = results[pos], leaves[i]
            pos += 1
            if arr is not t._data:
                t._device.backend.xp.copyto(t._data, arr, casting="unsafe")
            t._version[0] += 1
        for r in entry.escaped:
            arr = results[pos]
            pos += 1
            t = r()
            if t is not None:
                t._data = arr
                t._grad_fn = None
        entry.escaped = []
        for effect in entry.effects:
            effect()
        return unflatten(entry.out_struct, user)


def _cpu():
    from ember.device import as_device

    return as_device("cpu")


def _raised_as_eagerly(e: BaseException) -> bool:
    """Whether an error raised while tracing is one the function raises eagerly too (so what ran before it
    must take effect, as eagerly): not an interrupt, nor an error tracing alone causes (a Python read of a
    value only the graph knows, an op that needs values)."""
    return isinstance(e, Exception) and not isinstance(e, (ConcretizationError, DataDependentError))


def _restore_grads(tracer: Tracer) -> None:
    """Give captured tensors back the .grad they had before a trace that did not finish."""
    for t, before in tracer.grad_before.values():
        t.grad = before


def _escaped(tracer: Tracer) -> list:
    """Weak references to symbolic tensors made during the trace that are still alive: stored outside.

    A reference cycle can keep a dead tensor alive, so a collection confirms any suspect first.
    """
    alive = [r for r in tracer.created if r() is not None and is_symbolic(r())]
    if alive:
        gc.collect()
        alive = [r for r in alive if r() is not None and is_symbolic(r())]
    return alive


def _what_changed(old, new) -> str:
    """Name the first part of two cache keys that differs, for the retrace warning."""
    old_struct, old_leaves, old_modules, old_scalars, old_grad, old_autocast = old
    new_struct, new_leaves, new_modules, new_scalars, new_grad, new_autocast = new
    if old_leaves != new_leaves and len(old_leaves) == len(new_leaves):
        for i, (a, b) in enumerate(zip(old_leaves, new_leaves)):
            if a != b:
                return f"tensor/array argument {i}: {_leaf_str(a)} -> {_leaf_str(b)}"
    if old_struct != new_struct:
        return "the Python values or structure of the arguments"
    if old_modules != new_modules:
        return "an attribute, mode or tensor of a module the function uses"
    if old_scalars != new_scalars:
        changed = [f"{n}={v!r}" for (n, v) in new_scalars if (n, v) not in old_scalars]
        return f"global or closure value {', '.join(changed[:3])}"
    if old_grad != new_grad:
        return "grad mode"
    if old_autocast != new_autocast:
        return "autocast mode"
    return "the arguments"


def _leaf_str(k) -> str:
    return f"shape {fmt_shape(k[0])} {np.dtype(k[1]).name}"


def jit(fn=None, *, static_argnums=(), passes=None, cache_size: int = DEFAULT_CACHE_SIZE, dynamic=None):
    """Compile `fn` by tracing it into a graph (per input signature); usable as a decorator.

    `dynamic=None` (default): when only the first dimension of some arguments changes between calls
    (a shorter last batch), the function is traced once more with that size symbolic and the program
    serves every batch size it holds for; `dynamic=False` traces each size separately.
    """
    if fn is None:
        return lambda f: JitFunction(f, static_argnums, passes, cache_size, dynamic)
    return JitFunction(fn, static_argnums, passes, cache_size, dynamic)
