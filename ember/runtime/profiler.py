"""The profiler: `with em.profiler.profile() as prof:` records every kernel run, eager or graph.

Each event has the op's name, the algorithm its kernel chose (ember.kernels.selection: "winograd", "im2col +
one GEMM", ...), its input shapes, the device, the thread, a start time and a duration. `prof.table()`
summarises by op and algorithm; `prof.export_chrome_trace(path)` writes the Chrome
trace format that Perfetto and chrome://tracing open, with one row per thread, so kernels the
engine runs in parallel show side by side.
"""

from __future__ import annotations

import json
import os
import threading
import time

from ember.backends.meta import is_symbolic
from ember.interpreter import Interpreter, push, remove
from ember.kernels import selection

now = time.perf_counter_ns  # the profiler's clock (integer nanoseconds)


class _State:
    """The recording profile (None when off): read once per kernel by the dispatch hook."""

    active = None


state = _State()


class ProfilingInterpreter(Interpreter):
    """Times each eager kernel run below it and records it in a profile."""

    records_eager_kernels = True  # a fast path that bypasses the ops records itself in `profile` (dispatch)

    def __init__(self, profile) -> None:
        self.profile = profile

    def run(self, op, inputs, arrays, attrs, device):
        if device.type == "meta" or any(is_symbolic(a) for a in arrays):  # no kernel runs: nothing to time
            return self.below.run(op, inputs, arrays, attrs, device)
        selection.take_choices()
        t0 = now()
        out = self.below.run(op, inputs, arrays, attrs, device)
        self.profile.record(op.name, "eager", arrays, device, t0, now() - t0, chosen_algorithm(op.name))
        return out


def chosen_algorithm(op_name: str) -> str | None:
    """The algorithm(s) the kernel of `op_name` chose in this thread since the last call ("a + b" for several)."""
    names = [algorithm for op, algorithm, _ in selection.take_choices() if op == op_name]
    return " + ".join(dict.fromkeys(names)) or None


class Event:
    """One recorded kernel (or user range)."""

    __slots__ = ("name", "cat", "shapes", "device", "tid", "thread", "start_ns", "dur_ns", "algorithm")

    def __init__(self, name, cat, shapes, device, tid, thread, start_ns, dur_ns, algorithm=None) -> None:
        self.name = name
        self.algorithm = algorithm
        self.cat = cat
        self.shapes = shapes
        self.device = device
        self.tid = tid
        self.thread = thread
        self.start_ns = start_ns
        self.dur_ns = dur_ns

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    def overlaps(self, other: Event) -> bool:
        """Whether the two events' time intervals intersect."""
        return self.start_ns < other.end_ns and other.start_ns < self.end_ns

    def __repr__(self) -> str:
        by = f" by {self.algorithm}" if self.algorithm else ""
        return f"<Event {self.name}{by} [{self.cat}] {self.dur_ns / 1e3:.1f}us on {self.thread}>"


def shapes_of(arrays) -> tuple:
    """Input shapes as the profiler records them (scalars and None as ())."""
    return tuple(tuple(getattr(a, "shape", ())) for a in arrays)


class Profile:
    """A recording session; use through `profile()`."""

    def __init__(self, record_shapes: bool = True) -> None:
        self.record_shapes = record_shapes
        self.events: list[Event] = []
        self._t0 = 0
        self._prev = None

    # --- recording -------------------------------------------------------------------------
    def __enter__(self) -> Profile:
        self._t0 = time.perf_counter_ns()
        self._prev = state.active
        state.active = self
        self._eager = ProfilingInterpreter(self)
        selection.listening[0] += 1  # kernels note the algorithm they choose
        push(self._eager)  # eager ops of this thread are timed; plans record their kernels themselves
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                from ember.runtime import engine

                engine.wait_for_all()  # kernels still queued belong to this session
        finally:
            state.active = self._prev
            selection.listening[0] -= 1
            remove(self._eager)

    def record(self, name: str, cat: str, arrays, device, start_ns: int, dur_ns: int, algorithm=None) -> None:
        """Add one event for the calling thread (`arrays`: inputs or precomputed shapes; `algorithm`: what its
        kernel chose)."""
        if type(arrays) is not tuple or (arrays and type(arrays[0]) is not tuple):
            arrays = shapes_of(arrays) if self.record_shapes and arrays is not None else ()
        th = threading.current_thread()
        self.events.append(Event(name, cat, arrays, str(device), th.native_id, th.name, start_ns, dur_ns, algorithm))

    def timed(self, fn, name: str, info, cat: str, device="cpu"):
        """Run fn() and record it; `info` is the inputs (or their shapes)."""
        t0 = time.perf_counter_ns()
        try:
            return fn()
        finally:
            self.record(name, cat, info, device, t0, time.perf_counter_ns() - t0)

    # --- summaries ---------------------------------------------------------------------------
    def key_averages(self) -> list:
        """Rows (name, calls, total_ns, mean_ns, share) by op, most time first (user ranges excluded); an op that
        ran by several algorithms has a row for each, named "op [algorithm]"."""
        agg: dict = {}
        algorithms: dict = {}
        for e in self.events:
            if e.cat != "range":
                algorithms.setdefault(e.name, set()).add(e.algorithm)
        for e in self.events:
            if e.cat == "range":
                continue
            name = e.name if len(algorithms[e.name]) < 2 else f"{e.name} [{e.algorithm or 'default'}]"
            calls, total = agg.get(name, (0, 0))
            agg[name] = (calls + 1, total + e.dur_ns)
        grand = sum(t for _, t in agg.values()) or 1
        rows = [(n, c, t, t / c, t / grand) for n, (c, t) in agg.items()]
        rows.sort(key=lambda r: -r[2])
        return rows

    def table(self, sort_by: str = "total", row_limit: int | None = None) -> str:
        """A text table by op: calls, total and mean time, share of the kernel time."""
        rows = self.key_averages()
        key = {"total": lambda r: -r[2], "calls": lambda r: -r[1], "mean": lambda r: -r[3], "name": lambda r: r[0]}
        if sort_by not in key:
            raise ValueError(f"table: sort_by must be one of {sorted(key)}, got {sort_by!r}")
        rows.sort(key=key[sort_by])
        if row_limit is not None:
            rows = rows[:row_limit]
        width = max([len("op")] + [len(r[0]) for r in rows])
        lines = [f"{'op':<{width}}  {'calls':>7}  {'total':>12}  {'mean':>12}  {'%':>6}"]
        lines.append("-" * len(lines[0]))
        for name, calls, total, mean, share in rows:
            lines.append(f"{name:<{width}}  {calls:>7}  {_fmt_ns(total):>12}  {_fmt_ns(mean):>12}  {share * 100:>5.1f}%")
        total_ns = sum(r[2] for r in rows)
        lines.append("-" * len(lines[0]))
        lines.append(f"{'total':<{width}}  {sum(r[1] for r in rows):>7}  {_fmt_ns(total_ns):>12}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def chrome_trace(self) -> dict:
        """The events in Chrome's trace-event format (times in microseconds)."""
        pid = os.getpid()
        trace = []
        threads: dict = {}
        for e in self.events:
            threads.setdefault(e.tid, e.thread)
            trace.append({
                "name": e.name, "cat": e.cat, "ph": "X", "pid": pid, "tid": e.tid,
                "ts": (e.start_ns - self._t0) / 1e3, "dur": e.dur_ns / 1e3,
                "args": {"shapes": [list(s) for s in e.shapes], "device": e.device,
                         **({"algorithm": e.algorithm} if e.algorithm else {})},
            })
        for tid, name in threads.items():
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        trace.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "ember"}})
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path: str) -> str:
        """Write the Chrome trace JSON (open it in Perfetto or chrome://tracing); returns the path."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)
        return path


def profile(record_shapes: bool = True) -> Profile:
    """Context manager that records every kernel run inside it (eager ops and graph steps)."""
    return Profile(record_shapes)


class record_function:
    """Context manager marking a named user range in the trace (category "range")."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._t0 = 0

    def __enter__(self) -> record_function:
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        rec = state.active
        if rec is not None:
            rec.record(self.name, "range", (), "cpu", self._t0, time.perf_counter_ns() - self._t0)


def _fmt_ns(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"
