"""Writing a plan's outputs straight into given arrays (the tensors a jitted step updates in place).

A jitted training step returns each updated weight and optimizer buffer as a graph output; copying
those back costs two extra passes over every parameter per step. Instead the step that computes an
output may write it into the tensor's own array when nothing can observe the difference: every
reader of the old value (the captured tensor, or a view of it) runs no later than that step, and
when the step itself reads it, it reads it elementwise at the same index before writing (checked
per kernel below). At run time the array must also match the value's spec and share no memory
with any other input of the plan. Anything else keeps the copy-back.
"""

from __future__ import annotations

import numpy as np

from ember.runtime.memory import _roots, analyze, is_fresh

ENABLED = True  # False: always copy back (to compare both ways in one process)


def candidates(plan) -> dict:
    """What the plan's structure allows: `found`, output index -> (step index, position among the step's
    results) for outputs a step computes into fresh memory; the slots' facts, and each capture's slot."""
    if plan.variables:
        return {}
    infos = analyze(plan)
    roots = _roots(infos)
    capture_slot = {}
    for s, t in plan.captures:
        capture_slot.setdefault(id(t), s)
    producer = {}
    for i, step in enumerate(plan.steps):
        for p, s in enumerate(step.out_slots):
            producer[s] = (i, p)
    counts: dict = {}
    for s in plan.out_slots:
        counts[s] = counts.get(s, 0) + 1
    found = {}
    for k, s in enumerate(plan.out_slots):
        if counts[s] != 1 or s not in producer or not infos[s].own:
            continue
        i, p = producer[s]
        step = plan.steps[i]
        if not is_fresh(step.node.op) or not step.backend.direct:
            continue
        found[k] = (i, p)
    return {"found": found, "roots": roots, "infos": infos, "capture_slot": capture_slot}


def step_may_write(plan, facts, k: int, c) -> bool:
    """Whether output k's producer may write into the storage of capture slot c (None: not read)."""
    i, p = facts["found"][k]
    step = plan.steps[i]
    if c is None:
        return _writes_into(step, p)
    roots = facts["roots"]
    for j, other in enumerate(plan.steps):
        if j <= i:
            continue
        if any(c in roots[x] for x in other.in_slots if facts["infos"][x].is_array):
            return False  # the old value is read after the step that would overwrite it
    reads = [q for q, x in enumerate(step.in_slots) if facts["infos"][x].is_array and c in roots[x]]
    if not reads:
        return _writes_into(step, p)
    if any(step.in_slots[q] != c for q in reads):
        return False  # read through a view: another index mapping
    shape = plan.slot_value[step.out_slots[p]].shape
    if plan.slot_value[c] is None or tuple(plan.slot_value[c].shape) != tuple(shape):
        return False
    return _elementwise_alias_ok(step, p, reads)


def _writes_into(step, p: int) -> bool:
    if step.name in ("fused_elementwise", "fused_group"):
        return True
    return not step.multi and p == 0 and step.kernel_out is not None


def _elementwise_alias_ok(step, p: int, reads: list) -> bool:
    """Whether the step may overwrite its inputs at positions `reads` with result p."""
    if step.name == "fused_group":  # member m's result: only its own inputs may be the array it overwrites
        region = step.attrs["region"]
        n_in = len(region.inputs)
        m, p = divmod(p, len(region.outputs))
        if any(not m * n_in <= q < (m + 1) * n_in for q in reads):
            return False
        reads = [q - m * n_in for q in reads]
    elif step.name != "fused_elementwise":
        return not step.multi and p == 0 and step.kernel_out is not None and bool(step.node.op.inplace_ok)
    region = step.attrs["region"]
    j = _region_output_instr(region, p)
    if j is None:
        return False
    # The NumPy renderer computes instruction by instruction over whole arrays (or chunks): an input
    # read by a later instruction than the one writing the output would see the new values.
    for n, ins in enumerate(region.instrs):
        if n > j and any(a.kind == "in" and a.ref in reads for a in ins.args):
            return False
    return True


def _region_output_instr(region, p: int):
    """The instruction computing result p of a fused step (None: the reduction, never written in place)."""
    if region.reduce is not None:
        if p == 0:
            return None
        p -= 1
    return region.outputs[p]


class Targets:
    """The per-plan state: structural candidates and the verdict for the arrays of the last run."""

    def __init__(self, plan) -> None:
        self.facts = candidates(plan)
        self.static: dict = {}  # (output index, capture slot) -> bool
        self._key = None  # the arrays the cached verdict was made for, compared by identity
        self._verdict: dict = {}  # step index -> {result position: array}
        self._owners: dict = {}  # id of each target and of the array owning its memory -> True

    def overrides(self, plan, env: list, into: dict) -> dict:
        """{step index: {result position: array}} for the outputs in `into` that may be written in place."""
        facts = self.facts
        if not ENABLED or not facts or not facts["found"]:
            return {}
        held = [env[s] for s, _ in plan.captures]
        key = tuple(held) + tuple(a for a, _ in into.values())
        if self._key is None or len(key) != len(self._key) or any(x is not y for x, y in zip(key, self._key)):
            self._verdict = self._decide(plan, env, into)
            self._key = key
            self._owners = {}
            for targets in self._verdict.values():
                for a in targets.values():
                    self._owners[id(a)] = True
                    self._owners[id(_owner(a))] = True
        if not self._verdict:
            return {}
        for s, _ in plan.placeholders:  # arguments change every call: an argument may be a parameter
            if _may_overlap_targets(env[s], self):
                return {}
        return self._verdict

    def _decide(self, plan, env, into: dict) -> dict:
        facts = self.facts
        picked = {}
        cap_slot = facts["capture_slot"]
        for k, (arr, tensor) in into.items():
            if k not in facts["found"] or type(arr) is not np.ndarray:
                continue
            v = plan.slot_value[plan.out_slots[k]]
            if (v is None or arr.shape != tuple(v.shape) or arr.dtype != v.dtype or not arr.flags.c_contiguous
                    or not arr.flags.writeable):
                continue
            c = cap_slot.get(id(tensor))
            if c is not None and env[c] is not arr:
                continue
            ok = self.static.get((k, c))
            if ok is None:
                ok = self.static[(k, c)] = step_may_write(plan, facts, k, c)
            if ok:
                picked[k] = (arr, c)
        held = [(s, env[s]) for s, _ in plan.captures] + [(s, c) for s, c in plan.consts if isinstance(c, np.ndarray)]
        result: dict = {}
        for k, (arr, _c) in _disjoint(held, picked).items():
            i, p = facts["found"][k]
            result.setdefault(i, {})[p] = arr
        return result


def _owner(a):
    """The array owning a's memory (a itself when it owns it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _may_overlap_targets(a, targets: Targets) -> bool:
    if type(a) is not np.ndarray:
        return False
    if a.base is None:  # owns its memory: overlaps a target only by being it or its owner
        return id(a) in targets._owners
    lo, hi = _span(a)
    for step_targets in targets._verdict.values():
        for t in step_targets.values():
            lo2, hi2 = _span(t)
            if lo < hi2 and lo2 < hi:
                return True
    return False


def _span(a) -> tuple:
    return np.lib.array_utils.byte_bounds(a)


def _disjoint(held: list, picked: dict) -> dict:
    """The picked targets (k -> (array, own capture slot)) overlapping no held array but their own."""
    spans = [(*_span(a), ("in", s)) for s, a in held if isinstance(a, np.ndarray) and a.size]
    spans += [(*_span(a), ("out", k)) for k, (a, _c) in picked.items()]
    spans.sort(key=lambda x: x[0])
    bad = set()
    for n, (_lo, hi, who) in enumerate(spans):
        for lo2, _hi2, who2 in spans[n + 1:]:
            if lo2 >= hi:
                break
            for me, other in ((who, who2), (who2, who)):
                if me[0] == "out" and other != ("in", picked[me[1]][1]):
                    bad.add(me[1])
    return {k: v for k, v in picked.items() if k not in bad}
