"""Running a graph: compile the needed nodes into a flat plan of kernel calls over numbered slots.

A `Plan` is what later passes (fusion, memory planning, the parallel engine) rewrite: a list of
steps, each a kernel with input slots, attributes and output slots, plus the slots to free after
each step so intermediates die as soon as nothing needs them.

Running a plan takes one of two paths:
- in order: the steps one after another; with memory planning (the default) steps with an `out=`
  kernel write into a preallocated arena laid out by `memory_plan()` (buffers shared by values that
  are never alive together, in place where safe), without it each result is a fresh array;
- parallel: every step pushed to the dependency engine, so independent branches run at once on the
  worker threads (with an arena laid out so that any interleaving is safe).

A plan whose sizes are symbolic (a dynamic ember.jit program) runs through `specialize(env)`.
"""

from __future__ import annotations

import contextvars
import copy
import threading
import time

import numpy as np

from ember import config
from ember.backends.meta import MetaArray
from ember.errors import DataDependentError, fmt_shape
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, Value
from ember.kernels import selection
from ember.kernels.background import compiles_here
from ember.runtime import profiler as _profiler
from ember.symbolic import bind

_PARALLEL_MIN_WORK = 1 << 21  # estimated bytes touched below which the engine's overhead dominates
_TRIAL_RUNS = 3  # timed runs of each way (sequential, engine) before a plan picks one (the best of each counts),
# each way's after a first run that is not counted
_PARALLEL_MARGIN = 0.9  # the engine must be 10% faster to be chosen
_PARALLEL_MIN_GAIN = 1.4  # total work / critical path needed before running branches at once


class Step:
    """One kernel call: out_slots = kernel(xp, *env[in_slots], **attrs)."""

    __slots__ = ("node", "kernel", "kernel_out", "backend", "in_slots", "attrs", "out_slots", "free_after",
                 "multi", "name", "in_shapes")

    def __init__(self, node, kernel, backend, in_slots, attrs, out_slots, multi) -> None:
        self.node = node
        self.kernel = kernel
        self.kernel_out = node.op.kernel_out if kernel == node.op.kernel else None
        self.backend = backend
        self.in_slots = in_slots
        self.attrs = attrs
        self.out_slots = out_slots
        self.free_after = ()
        self.multi = multi
        self.name = node.op_name
        self.in_shapes = tuple(tuple(x.shape) if isinstance(x, Value) else () for x in node.inputs)

    def copy(self, in_slots, out_slots, name=None) -> Step:
        """The same kernel over other slots (rematerialisation recomputes a step this way)."""
        s = Step.__new__(Step)
        for f in Step.__slots__:
            setattr(s, f, getattr(self, f))
        s.in_slots = tuple(in_slots)
        s.out_slots = tuple(out_slots)
        s.free_after = ()
        if name is not None:
            s.name = name
        return s

    def __repr__(self) -> str:
        return f"<step {self.name} {self.in_slots}->{self.out_slots}>"


class Plan:
    """The compiled form of (graph, outputs): slots for values and steps that fill them."""

    def __init__(self, graph, outputs, extra_nodes=(), *, remat=None) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        nodes = graph.needed_for(self.outputs + list(extra_nodes))
        self.nodes = nodes
        self.slot_of: dict = {}
        self.slot_value: list = []  # slot -> its Value (None for Python scalars)
        self.n_slots = 0
        self.consts: list = []  # (slot, value) preloaded before every run
        self.placeholders: list = []  # (slot, value)
        self.captures: list = []  # (slot, tensor)
        self.variables: list = []  # (slot, variable)
        self.steps: list[Step] = []
        self.remat = None  # what rematerialisation did (ember.runtime.remat.RematInfo)
        for node in nodes:
            self._compile(node)
        self.out_slots = [self._slot_for_output(v) for v in self.outputs]
        policy = config.REMAT.get() if remat is None else remat
        if policy:
            from ember.runtime.remat import rematerialize

            rematerialize(self, policy)
        self._plan_frees()
        self._tell_unread_records()
        self._memory: dict = {}  # mode -> MemoryPlan
        self._arenas: dict = {}  # mode -> [free Arena]
        self._parallel_gain = None
        self._parallel_trial = {False: [], True: []}  # seconds per run of each way, until one is chosen
        self._write_through = None  # ember.graph.write_through.Targets, made on the first run given `into`

    def _new_slot(self, value=None) -> int:
        self.n_slots += 1
        self.slot_value.append(value)
        return self.n_slots - 1

    def _slot_for_output(self, v):
        if isinstance(v, Value):
            return self.slot_of[v]
        raise TypeError(f"cannot fetch {v!r}: not a graph value")

    def _compile(self, node) -> None:
        if node.kind == "op":
            in_slots = []
            for x in node.inputs:
                if isinstance(x, Value):
                    in_slots.append(self.slot_of[x])
                else:  # Python scalars (and None) live in constant slots
                    s = self._new_slot()
                    self.consts.append((s, x))
                    in_slots.append(s)
            outs = []
            for v in node.outputs:
                s = self._new_slot(v)
                self.slot_of[v] = s
                outs.append(s)
            backend = node.outputs[0].device.backend if node.outputs else None
            kernel = getattr(node.op, "run_kernel", None) or node.op.kernel
            self.steps.append(
                Step(node, kernel, backend, tuple(in_slots), node.attrs, tuple(outs), len(node.outputs) != 1)
            )
            return
        v = node.outputs[0]
        s = self._new_slot(v)
        self.slot_of[v] = s
        if node.kind == PLACEHOLDER:
            self.placeholders.append((s, v))
        elif node.kind == CAPTURE:
            self.captures.append((s, node.attrs["tensor"]))
        elif node.kind == CONSTANT:
            self.consts.append((s, node.attrs["value"]))
        elif node.kind == VARIABLE:
            self.variables.append((s, node.attrs["variable"]))
        else:
            raise ValueError(f"unknown node kind {node.kind!r}")

    def _plan_frees(self) -> None:
        """Free each intermediate slot right after its last reader (outputs are never freed)."""
        keep = set(self.out_slots)
        last_use: dict = {}
        for i, step in enumerate(self.steps):
            for s in step.in_slots:
                last_use[s] = i
        produced = {s for step in self.steps for s in step.out_slots}
        frees: dict = {}
        for s, i in last_use.items():
            if s in produced and s not in keep:
                frees.setdefault(i, []).append(s)
        for i, step in enumerate(self.steps):
            # A result nobody reads (an unused output of a multi-output step) goes at once.
            unread = [s for s in step.out_slots if s not in last_use and s not in keep]
            step.free_after = tuple(frees.get(i, ())) + tuple(unread)

    # --- symbolic sizes ----------------------------------------------------------------------------
    def specialize(self, env: dict) -> Plan:
        """This plan for one assignment of its symbolic sizes (`ember.symbolic`): the same steps
        with their attributes, constants and value shapes evaluated for `env`, and its own memory plan."""
        plan = copy.copy(self)
        plan.consts = [(s, bind(c, env)) for s, c in self.consts]
        plan.slot_value = [None if v is None else MetaArray(bind(v.shape, env), v.dtype) for v in self.slot_value]
        steps = []
        for step in self.steps:
            st = step.copy(step.in_slots, step.out_slots)
            st.attrs = bind(step.attrs, env)
            st.in_shapes = bind(step.in_shapes, env)
            st.free_after = step.free_after
            steps.append(st)
        plan.steps = steps
        plan._memory, plan._arenas, plan._parallel_gain = {}, {}, None
        plan._parallel_trial = {False: [], True: []}
        plan._write_through = None
        return plan
    def _tell_unread_records(self) -> None:
        """Ops whose output 0 is a record for gradients (control flow) fill it only when something reads it."""
        read = set(self.out_slots)
        for step in self.steps:
            read.update(step.in_slots)
        for step in self.steps:
            if getattr(step.node.op, "records", False):
                step.attrs = {**step.attrs, "record": step.out_slots[0] in read}

    # --- memory ----------------------------------------------------------------------------------
    def memory_plan(self, mode: str = "sequential"):
        """The buffer assignment of this plan's intermediates (cached; see ember.runtime.memory)."""
        mem = self._memory.get(mode)
        if mem is None:
            from ember.runtime.memory import plan_memory

            mem = plan_memory(self, mode)
            mem.remat = self.remat
            self._memory[mode] = mem
        return mem

    def _take_arena(self, mode: str):
        free = self._arenas.get(mode)
        if free:
            try:
                return free.pop()
            except IndexError:
                pass
        from ember.runtime.arena import Arena

        return Arena(self, self.memory_plan(mode))

    def _give_arena(self, mode: str, arena) -> None:
        self._arenas.setdefault(mode, []).append(arena)

    # --- running ---------------------------------------------------------------------------------
    def run(self, feeds: dict, *, memory: bool | None = None, parallel=None, into: dict | None = None) -> list:
        """Execute with `feeds` (Value -> backend array); returns the output arrays.

        memory: use the memory plan (arena + out= kernels); default: the global setting (on).
        parallel: run through the dependency engine; default: the global setting ("auto": when the
        engine has more than one thread and the plan has independent branches with enough work).
        into: {output index: (array, tensor)}: outputs to compute straight into the tensor's array where
        that is safe (ember.graph.write_through; run in order only); the result is then that array.
        """
        env = self._load(feeds)
        if memory is None:
            memory = config.MEMORY_PLAN.get()
        if parallel is None:
            parallel = config.PARALLEL.get()
        trial = None
        if parallel == "auto":
            parallel = self._parallel_helps()
            if parallel:
                parallel, trial = self._next_trial()
        if parallel:
            from ember.runtime.engine import in_worker

            if in_worker():
                trial = None  # a plan run inside an engine job runs in order: nothing to compare
            else:
                if trial is None:
                    return self._run_engine(env, memory)
                t0 = time.perf_counter()
                out = self._run_engine(env, memory)
                trial.append(time.perf_counter() - t0)
                return out
        t0 = time.perf_counter()
        out = self._run_sequential(env, memory, self._overrides(env, into) if into else None)
        if trial is not None:
            trial.append(time.perf_counter() - t0)
        return out

    def _next_trial(self):
        """(parallel?, the list to add this run's time to or None): the first runs try the two ways, in
        order, one block each; from then on the faster one runs. The cost model only says the engine *may*
        pay: its per-step hand-offs between threads cost more than small kernels gain (an LSTM's time loop)."""
        runs = self._parallel_trial
        if runs is None:
            return self._parallel_choice, None
        # Each way's first run is not counted: it pays the switch (the other way's threads still polling for work,
        # its own arena's first touch). Alternating run by run made every run pay it, and a transformer step whose
        # engine ran 35% slower than its sequential loop was given the engine in one process of four.
        for way in (False, True):
            if len(runs[way]) < _TRIAL_RUNS + 1:
                return way, runs[way]
        self._parallel_choice = min(runs[True][1:]) < min(runs[False][1:]) * _PARALLEL_MARGIN
        self._parallel_trial = None
        self._arenas.pop("sequential" if self._parallel_choice else "parallel", None)  # the losing way's memory
        return self._parallel_choice, None

    def _overrides(self, env: list, into: dict) -> dict:
        """{step index: {result position: array}} for the outputs of `into` written in place this run."""
        if self._write_through is None:
            from ember.graph.write_through import Targets

            self._write_through = Targets(self)
        return self._write_through.overrides(self, env, into)

    def _run_sequential(self, env: list, memory: bool, overrides: dict | None = None) -> list:
        rec = _profiler.state.active
        arena = self._take_arena("sequential") if memory else None
        try:
            self._run_steps(env, arena.outs if arena is not None else None, rec, overrides)
        finally:
            if arena is not None:
                self._give_arena("sequential", arena)
        return [_as_array(env[s]) for s in self.out_slots]

    def _load(self, feeds: dict) -> list:
        env = [None] * self.n_slots
        for s, c in self.consts:
            env[s] = c
        for s, v in self.placeholders:
            try:
                x = feeds[v]
            except KeyError:
                raise UnfedPlaceholderError(v) from None
            env[s] = x if type(x) is np.ndarray else _resolve(x)
        for s, t in self.captures:
            data = t._data
            if type(data) is not np.ndarray:
                if isinstance(data, Value):
                    raise RuntimeError(f"a captured tensor of shape {fmt_shape(t.shape)} is still symbolic at run time")
                data = _resolve(data)
            env[s] = data
        for s, var in self.variables:
            env[s] = var.read_storage()
        return env

    def _run_steps(self, env: list, outs, rec, overrides=None) -> None:
        """The step loop, with an arena (`outs[k]`: step k's preallocated result), arrays some steps write
        their results into (`overrides[k]`: result position -> array) and a profiler when given."""
        step = None
        try:
            explaining = selection.listening[0] and rec is None  # ember.kernels.explain: what each step ran
            for k, step in enumerate(self.steps):
                t0 = _profiler.now() if rec is not None else 0
                before = selection.pending() if explaining else 0
                args = [env[i] for i in step.in_slots]
                if overrides and k in overrides:
                    out = _call_into(step, args, overrides[k], outs[k] if outs is not None else None)
                else:
                    out = _call(step, args, outs[k] if outs is not None else None)
                if explaining and step.name != "fused region":
                    selection.ran_default(step.name, before)
                if rec is not None:
                    rec.record(step.name, "graph", step.in_shapes, step.backend.device, t0, _profiler.now() - t0,
                               _profiler.chosen_algorithm(step.name))
                if step.multi:
                    for s, o in zip(step.out_slots, out):
                        env[s] = o
                else:
                    env[step.out_slots[0]] = out
                for s in step.free_after:
                    env[s] = None
        except DataDependentError:
            raise
        except Exception as e:
            _raise_step_error(step, e)

    # --- parallel ------------------------------------------------------------------------------
    def _parallel_helps(self) -> bool:
        """Whether the engine is worth it: threads to spare, independent branches, enough work."""
        from ember.runtime.threads import get_num_interop_threads

        if get_num_interop_threads() < 2:
            return False
        if self._parallel_gain is None:
            self._parallel_gain = _parallel_gain(self)
        return self._parallel_gain >= _PARALLEL_MIN_GAIN

    def _run_engine(self, env: list, memory: bool) -> list:
        from ember.runtime.engine import get_engine

        eng = get_engine()
        arena = self._take_arena("parallel") if memory else None
        outs = arena.outs if arena is not None else None
        keep = set(self.out_slots)
        produced = {s for step in self.steps for s in step.out_slots}
        readers: dict = {}
        for step in self.steps:
            for s in set(step.in_slots):
                readers[s] = readers.get(s, 0) + 1
        var_of: dict = {}
        node_step: dict = {}  # node id -> a variable its (first) step writes
        errors: list = []
        lock = threading.Lock()
        done = threading.Event()
        left = [len(self.steps)]

        def finish(step, k, exc=None):
            with lock:
                if exc is not None:
                    errors.append((k, step, exc))
                for s in set(step.in_slots):
                    readers[s] -= 1
                    if readers[s] == 0 and s in produced and s not in keep:
                        env[s] = None
                for s in step.out_slots:
                    if s not in readers and s not in keep:
                        env[s] = None
                left[0] -= 1
                if left[0] == 0:
                    done.set()

        def make_job(step, k):
            out_buf = outs[k] if outs is not None else None
            ctx = contextvars.copy_context()  # the kernel runs in the caller's context (e.g. a session's variables)

            def job():
                ctx.run(run_step)

            def run_step():
                if errors:
                    return finish(step, k)  # an earlier step failed: the run is abandoned
                try:
                    out = _call(step, [env[i] for i in step.in_slots], out_buf)
                    if step.multi:
                        for s, o in zip(step.out_slots, out):
                            env[s] = o
                    else:
                        env[step.out_slots[0]] = out
                except Exception as e:  # noqa: BLE001 - re-raised by run() after the others finish
                    return finish(step, k, e)
                finish(step, k)

            return job

        if not self.steps:
            done.set()
        state = eng.new_var("state")  # stateful steps (random draws) keep their order: same numbers as in sequence
        for k, step in enumerate(self.steps):
            reads = [var_of[s] for s in step.in_slots if s in var_of]
            for c in step.node.control_inputs:
                if c.id in node_step:
                    reads.append(node_step[c.id])
            writes = [state] if getattr(step.node.op, "stateful", False) else []
            for s in step.out_slots:
                v = var_of[s] = eng.new_var(f"slot{s}")
                writes.append(v)
            if not step.out_slots:
                writes.append(eng.new_var(f"step{k}"))  # something for control dependents to wait on
            node_step.setdefault(step.node.id, writes[-1])
            eng.push(make_job(step, k), reads, writes, name=step.name, info=step.in_shapes)
        done.wait()
        if arena is not None:
            self._give_arena("parallel", arena)
        if errors:
            k, step, exc = min(errors, key=lambda e: e[0])
            if isinstance(exc, DataDependentError):
                raise exc
            _raise_step_error(step, exc)
        return [_as_array(env[s]) for s in self.out_slots]

    def __len__(self) -> int:
        return len(self.steps)


@compiles_here
def _call(step: Step, args: list, out):
    """Run one step, into `out` when the step has an out= kernel and a planned buffer."""
    if out is not None:
        return step.kernel_out(np, *args, out=out, **step.attrs)
    if step.backend.direct:
        return step.kernel(np, *args, **step.attrs)
    return step.backend.run(step.kernel, args, step.attrs)


@compiles_here
def _call_into(step: Step, args: list, targets: dict, out):
    """Run one step with some results written into given arrays (`targets`: result position -> array)."""
    if step.name in ("fused_elementwise", "fused_group"):
        return step.node.op.kernel_into(np, *args, targets=targets, **step.attrs)
    return step.kernel_out(np, *args, out=targets[0], **step.attrs)


class UnfedPlaceholderError(ValueError):
    """A run needs a placeholder no value was fed for; `value` is the placeholder."""

    def __init__(self, value: Value) -> None:
        self.value = value
        name = value.node.name or f"%{value.node.id}"
        super().__init__(f"placeholder {name!r} (shape {fmt_shape(value.shape)}, {value.dtype.name}) is needed for "
                         "this run but was not fed")


def _raise_step_error(step, e: Exception):
    """Raise a kernel's error naming the graph node (also its `node` attribute), of the class eager execution
    raises (an op's own IndexError or ValueError stays one under jit; NumPy's other errors become a RuntimeError, as
    eagerly)."""
    node = step.node if step is not None else None
    where = f"{node.op_name} (node %{node.id})" if node is not None else "graph"
    message = f"{where} failed while running the graph: {type(e).__name__}: {e}"
    own = node is not None and (type(e).__module__.startswith("ember") or str(e).startswith(node.op_name + ":"))
    err = same_class_error(e, message) if own or isinstance(e, IndexError) else RuntimeError(message)
    err.node = node
    raise err from e


def same_class_error(e: Exception, message: str) -> Exception:
    """An error of e's class with `message` when that class is a built-in one or ember's own (whose constructors
    take one message), else a RuntimeError."""
    cls = type(e)
    if cls.__module__ in ("builtins", "ember.errors") and cls not in (KeyError, UnicodeError):
        try:
            return cls(message)
        except TypeError:  # a class whose constructor wants more
            pass
    return RuntimeError(message)


def _resolve(x):
    """The array behind a pending async-eager value (anything else unchanged)."""
    result = getattr(x, "result", None)
    return result() if getattr(type(x), "pending", False) and result is not None else x


def _step_cost(step: Step) -> int:
    """Rough bytes of work for a step: its operands and results (products count the inner dim too)."""
    n = 0
    for v in step.node.outputs:
        n += _nbytes(v)
    for x in step.node.inputs:
        if isinstance(x, Value):
            n += _nbytes(x)
    if step.node.op_name in ("matmul", "linear") and step.node.inputs and isinstance(step.node.inputs[0], Value):
        k = step.node.inputs[0].shape[-1] if step.node.inputs[0].shape else 1
        n += _nbytes(step.node.outputs[0]) * (k or 1) // 4
    return n


def _nbytes(v) -> int:
    n = v.dtype.itemsize
    for d in v.shape:
        n *= d if d is not None else 1
    return n


def _parallel_gain(plan: Plan) -> float:
    """Total work / critical-path work, or 0 when the plan should not run on the engine."""
    if not plan.steps or plan.variables or any(s.node.control_inputs for s in plan.steps):
        return 0.0  # graphs with side effects (ember.v1 state) run in order
    producer: dict = {}
    path: list = []
    total = 0
    for i, step in enumerate(plan.steps):
        c = _step_cost(step)
        total += c
        before = max((path[producer[s]] for s in step.in_slots if s in producer), default=0)
        path.append(before + c)
        for s in step.out_slots:
            producer[s] = i
    if total < _PARALLEL_MIN_WORK:
        return 0.0
    return total / max(max(path), 1)


def _as_array(x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x
