"""What a study leaves behind: the results table (printed and as trials.csv) and best.json with its command line."""

from __future__ import annotations

import csv
import json
import os
import shlex

from ember.train.callbacks import writing


def accuracy(t) -> float | None:
    """A trial's accuracy: its value, or a pruned trial's last reported one."""
    if t.value is not None:
        return t.value
    if t.intermediate_values:
        return t.intermediate_values[max(t.intermediate_values)]
    return None


def rows(trials, keys: list[str]) -> list[dict]:
    """One row per trial: number, state, accuracy, params; complete trials first, then pruned, then failed,
    each by accuracy, best first (a pruned trial's accuracy is of fewer epochs, so not comparable)."""
    out = []
    for t in trials:
        failed = t.state.name == "FAIL"  # a failed trial's partial accuracy is no result
        row = {"trial": t.number, "state": t.state.name.lower(), "accuracy": None if failed else accuracy(t),
               "epochs": t.user_attrs.get("epochs"), "time_s": t.user_attrs.get("time_s"),
               "pid": t.user_attrs.get("pid")}
        row.update({k: t.params.get(k) for k in keys})
        row["error"] = t.user_attrs.get("error") or ("interrupted" if t.user_attrs.get("interrupted") else "")
        out.append(row)
    order = {"complete": 0, "pruned": 1}
    return sorted(out, key=lambda r: (order.get(r["state"], 2), r["accuracy"] is None, -(r["accuracy"] or 0.0),
                                      r["trial"]))


def write_csv(path: str, table: list[dict]) -> None:
    """trials.csv: the rows, accuracy as a fraction, time in seconds (replaced atomically: read while running)."""
    if not table:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with writing(path):
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
        os.replace(tmp, path)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_table(table: list[dict], keys: list[str], max_epochs: int) -> str:
    """The results as aligned text: trial, state, accuracy, epochs, time, then the searched parameters."""
    head = ["trial", "state", "accuracy", "epochs", "time", *keys]
    body = []
    for r in table:
        acc = f"{r['accuracy'] * 100:.2f}%" if r["accuracy"] is not None else "-"
        time_s = f"{r['time_s']:.1f}s" if r["time_s"] is not None else "-"
        body.append([str(r["trial"]), r["state"], acc, f"{r['epochs'] or 0}/{max_epochs}", time_s,
                     *(_cell(r[k]) for k in keys)])
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    numeric = {0, 2, 3, 4}
    lines = []
    for row in [head, *body]:
        lines.append("  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def command(t) -> str:
    """The `ember train` command line that reruns trial `t` (same settings and seed, so the same numbers)."""
    return shlex.join(["ember", "train", *t.user_attrs["command"]])


def write_best(path: str, t, out: str) -> dict:
    """best.json: the best trial's number, accuracy, searched parameters, full settings and command line."""
    best = {"trial": t.number, "accuracy": t.value, "params": t.params, "settings": t.user_attrs.get("settings"),
            "command": command(t), "folder": os.path.join(out, f"trial-{t.number:03d}")}
    with writing(path), open(path, "w") as f:
        json.dump(best, f, indent=2)
        f.write("\n")
    return best

