"""`explain(fn, *args, **kwargs)`: run `fn` once and say, for every op it ran, which algorithm computed it and
the rule that chose it.

The op runs are seen by an interpreter put on top of this thread's stack while `fn` runs; the choices inside
each op's kernel are those `selection.choose` and `selection.record` note while someone listens. A jitted
function's plan runs its kernels without the interpreter: its choices are listed under the op that made
them. `print(explain(...))` shows a table; `.rows` holds (op, inputs, algorithm, rule, count).
"""

from __future__ import annotations

from ember import interpreter
from ember.kernels import selection


class _Recorder(interpreter.Interpreter):
    """Records each op that runs below it, with the kernel choices made while it ran."""

    def __init__(self) -> None:
        self.seen: list = []

    def run(self, op, inputs, arrays, attrs, device):
        self._flush()
        out = self.below.run(op, inputs, arrays, attrs, device)
        shapes = ", ".join(_spec(a) for a in arrays if hasattr(a, "shape"))
        choices = selection.take_choices()
        if not choices:
            backend = getattr(device, "type", "cpu")
            default = "numpy" if backend == "cpu" else "shape rule" if backend == "meta" else backend
            choices = [(op.name, default, "its one kernel")]
        for name, algorithm, rule in choices:
            self.seen.append((name, shapes if name == op.name else "", algorithm, rule))
        return out

    def _flush(self) -> None:
        """Choices made outside an op's run (a jitted plan's kernels) become rows of their own."""
        for name, algorithm, rule in selection.take_choices():
            self.seen.append((name, "", algorithm, rule))


def _spec(a) -> str:
    return f"{getattr(a.dtype, 'name', a.dtype)}{list(a.shape)}"


class Explanation:
    """What `explain` found: `rows` of (op, inputs, algorithm, rule, count), in the order first seen."""

    def __init__(self, seen: list) -> None:
        counts: dict = {}
        for row in seen:
            counts[row] = counts.get(row, 0) + 1
        self.rows = [row + (n,) for row, n in counts.items()]

    def algorithms(self, op: str) -> list:
        """The algorithms that computed `op`, in the order first seen."""
        return [row[2] for row in self.rows if row[0] == op]

    def __str__(self) -> str:
        header = ("op", "inputs", "algorithm", "why", "calls")
        rows = [header] + [(op, inputs, algorithm, rule, str(n)) for op, inputs, algorithm, rule, n in self.rows]
        widths = [min(max(len(r[k]) for r in rows), 60) for k in range(4)]
        lines = []
        for r in rows:
            cells = [r[k].ljust(widths[k]) if len(r[k]) <= widths[k] else r[k] for k in range(4)]
            lines.append("  ".join(cells + [r[4]]).rstrip())
            if r is header:
                lines.append("  ".join("-" * w for w in widths) + "  -----")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Explanation({len(self.rows)} rows)"


def explain(fn, *args, **kwargs) -> Explanation:
    """Run fn(*args, **kwargs) once and return which algorithm ran for each op it ran, and why."""
    recorder = _Recorder()
    selection.take_choices()
    selection.listening[0] += 1
    try:
        with recorder:
            fn(*args, **kwargs)
        recorder._flush()
    finally:
        selection.listening[0] -= 1
    return Explanation(recorder.seen)
