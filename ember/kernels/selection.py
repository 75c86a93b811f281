"""How a kernel is chosen: each op's algorithms with the rule that lets each run, one table of thresholds per
op with the machine they were measured on, and the record of what was chosen (for `explain` and the profiler).

An op with several ways to compute it lists them as `Algorithm`s in order of preference, each with an `applies`
test and a one-line `rule` saying when it applies; `choose` takes the first that applies (the last one always
does: the NumPy path). This is PyTorch's `_select_conv_backend`, for every op: one function decides, and the
decision can be read back. The thresholds its rules compare against live in a `Table` per op, which names the
machine each value was measured on, so a number tuned on one CPU is visible as such. `document()` renders every
op's algorithms and thresholds for docs/architecture.md ("which kernel runs when").

Recording costs nothing unless someone listens: `explain` (ember.kernels.explain) and the profiler raise
`listening` while they run and read the choices an op made from `take_choices()`.
"""

from __future__ import annotations

import threading

ALGORITHMS: dict[str, list] = {}  # op -> its algorithms, in order of preference
TABLES: dict[str, Table] = {}  # op -> its thresholds
_local = threading.local()
listening = [0]  # > 0 while explain or the profiler records choices


class Table:
    """One op's tuned thresholds: name -> value, each with why it is that value, and the machine it was measured
    on. `table[name]` reads a value (a dict lookup: rules read it on every call)."""

    def __init__(self, op: str, measured_on: str, values: dict) -> None:
        self.op = op
        self.measured_on = measured_on
        self.why = {name: why for name, (_, why) in values.items()}
        self._values = {name: value for name, (value, _) in values.items()}
        TABLES[op] = self

    def __getitem__(self, name: str):
        return self._values[name]

    def set(self, name: str, value) -> None:
        """Change a threshold for this process (tuning experiments and tests); KeyError for an unknown name."""
        if name not in self._values:
            raise KeyError(f"{self.op}: no threshold {name!r}; it has {', '.join(self._values)}")
        self._values[name] = value

    def items(self):
        """(name, value, why) of every threshold."""
        return [(name, value, self.why[name]) for name, value in self._values.items()]


class Algorithm:
    """One way to compute an op: its `name`, the `rule` (one line) under which it runs, the `applies(*problem)`
    test of that rule, and `run`, the function that computes it (arrays in, arrays out)."""

    __slots__ = ("name", "rule", "applies", "run")

    def __init__(self, name: str, rule: str, applies, run=None) -> None:
        self.name = name
        self.rule = rule
        self.applies = applies
        self.run = run

    def __repr__(self) -> str:
        return f"Algorithm({self.name!r})"


def always(*_problem) -> bool:
    """An applies() test that always passes: the last algorithm of a list, the path that computes anything."""
    return True


def algorithms(op: str, listed: list) -> list:
    """Register `listed` as `op`'s algorithms, in order of preference (the last must always apply); returns it."""
    ALGORITHMS[op] = listed
    return listed


def choose(op: str, listed: list, *problem) -> Algorithm:
    """The first of `listed` whose rule applies to `problem`, recorded when someone listens."""
    for algorithm in listed:
        if algorithm.applies(*problem):
            if listening[0]:
                record(op, algorithm.name, algorithm.rule)
            return algorithm
    raise AssertionError(f"{op}: no algorithm applies (the last of a list must always apply)")


def run_first(op: str, listed: list, *problem):
    """The result of the first of `listed` that applies to `problem` and does not decline (an algorithm's run may
    answer None where the values, not the shapes, rule it out: Winograd on inf, NaN or huge inputs); recorded when
    someone listens."""
    for algorithm in listed:
        if algorithm.applies(*problem):
            result = algorithm.run(*problem)
            if result is not None:
                if listening[0]:
                    record(op, algorithm.name, algorithm.rule)
                return result
    raise AssertionError(f"{op}: no algorithm ran (the last of a list must always apply and run)")


def record(op: str, algorithm: str, rule: str) -> None:
    """Note that `op` ran `algorithm` because of `rule` (kernels that choose without a list call this directly)."""
    if listening[0]:
        choices = getattr(_local, "choices", None)
        if choices is None:
            choices = _local.choices = []
        choices.append((op, algorithm, rule))


def note(op: str, algorithm: str) -> None:
    """Note that `op` ran its registered `algorithm` (a kernel that decides inside itself, e.g. compiled rows where
    Numba runs and the size repays the call, calls this on that path; its NumPy fallback notes nothing)."""
    if listening[0]:
        rule = next((a.rule for a in ALGORITHMS.get(op, ()) if a.name == algorithm), "")
        record(op, algorithm, rule)


def compiled_or_numpy(op: str, compiled: str, rule: str, numpy_rule: str = "otherwise: NumPy") -> list:
    """Register an op whose kernel is a compiled one where `rule` holds, else NumPy (for `document()` and
    `note()`); returns the list."""
    return algorithms(op, [Algorithm(compiled, rule, None), Algorithm("numpy", numpy_rule, always)])


def pending() -> int:
    """How many choices this thread has recorded since the last take_choices()."""
    return len(getattr(_local, "choices", None) or ())


def ran_default(op: str, since: int) -> None:
    """Note that `op` ran its one kernel where nothing was recorded since `pending()` said `since` (a graph
    plan's steps, which run without an interpreter)."""
    if pending() == since:
        record(op, "numpy", "its one kernel")


def take_choices() -> list:
    """The (op, algorithm, rule) choices recorded in this thread since the last call, emptied."""
    choices = getattr(_local, "choices", None)
    _local.choices = None
    return choices or []


def document() -> str:
    """Every op's algorithms (in order of preference, with the rule each runs under) and thresholds (with the
    machine they were measured on), as two Markdown tables."""
    rows = ["| op | algorithm | runs where |", "|---|---|---|"]
    for op in sorted(ALGORITHMS):
        for k, algorithm in enumerate(ALGORITHMS[op], 1):
            rows.append(f"| {op if k == 1 else ''} | {k}. `{algorithm.name}` | {algorithm.rule} |")
    rows += ["", "| op | threshold | value | why | measured on |", "|---|---|---|---|---|"]
    for op in sorted(TABLES):
        table = TABLES[op]
        for k, (name, value, why) in enumerate(table.items()):
            shown = f"{int(value):,}" if isinstance(value, (int, float)) and float(value).is_integer() else value
            rows.append(f"| {op if k == 0 else ''} | `{name}` | {shown} | {why} | {table.measured_on if k == 0 else ''} |")
    return "\n".join(rows) + "\n"
