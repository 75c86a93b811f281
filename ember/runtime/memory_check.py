"""`validate`: an independent check of a memory plan — no two values that may be alive at once share bytes.

It recomputes lifetimes from the plan's steps alone (aliasing closed by a fixpoint) instead of
trusting the planner's, so a planner bug surfaces as an AssertionError naming the values.
"""

from __future__ import annotations

import numpy as np

from ember.runtime.memory import PARALLEL, SEQUENTIAL, MemoryPlan, _inplace_ok, ancestors, is_fresh


def validate(plan_or_memory, mode: str | None = None) -> MemoryPlan:
    """Check a memory plan: no two values that may be alive at once share a buffer.

    Lifetimes are recomputed here from the steps alone (with aliasing closed by a fixpoint), not
    taken from the planner, so a planner bug shows up as an AssertionError naming the values.
    Returns the memory plan checked.
    """
    mp = plan_or_memory if isinstance(plan_or_memory, MemoryPlan) else plan_or_memory.memory_plan(mode or SEQUENTIAL)
    plan = mp.plan
    steps = plan.steps
    n_slots = plan.n_slots
    scalar = {s for s, c in plan.consts if not isinstance(c, np.ndarray)}
    start = [-1] * n_slots
    end = [-1] * n_slots
    touch = [0] * n_slots
    edges = []  # (v, x): value v may share memory with x
    for i, step in enumerate(steps):
        for s in step.in_slots:
            end[s] = max(end[s], i)
            touch[s] |= 1 << i
        op = step.node.op
        arrays = [s for s in step.in_slots if s not in scalar]
        for s in step.out_slots:
            start[s] = i
            end[s] = max(end[s], i)
            touch[s] |= 1 << i
            if op.is_view:
                edges.extend((s, x) for x in arrays[:1])
            elif not is_fresh(op):
                edges.extend((s, x) for x in arrays)
    changed = True
    while changed:
        changed = False
        for v, x in edges:
            if end[v] > end[x]:
                end[x] = end[v]
                changed = True
            if touch[v] & ~touch[x]:
                touch[x] |= touch[v]
                changed = True
    alias: dict = {}
    for v, x in edges:
        alias.setdefault(v, set()).add(x)

    def closure(s):
        seen, stack = {s}, [s]
        while stack:
            for x in alias.get(stack.pop(), ()):
                if x not in seen:
                    seen.add(x)
                    stack.append(x)
        return seen

    sources = {s for s, _ in plan.placeholders} | {s for s, _ in plan.captures} | {s for s, _ in plan.variables}
    sources |= {s for s, _ in plan.consts}
    out_reach = set()
    for s in plan.out_slots:
        out_reach |= closure(s)
    anc = ancestors(plan) if mp.mode == PARALLEL else None

    def fail(msg):
        raise AssertionError(f"invalid memory plan ({mp.mode}): {msg}")

    for s, b in mp.assign.items():
        if s in sources:
            fail(f"graph input slot {s} was given buffer {b}")
        if s in out_reach:
            fail(f"slot {s} ({mp.infos[s].label}) is, or may alias, an output but was given buffer {b}")
        if not mp.infos[s].own:
            fail(f"view slot {s} ({mp.infos[s].label}) was given buffer {b}")
    placed = []  # (slot, first byte, end byte)
    for buf in mp.buffers:
        if buf.offset % 64:
            fail(f"buffer {buf.id} starts at offset {buf.offset}, not 64-byte aligned")
        for s in buf.values:
            if mp.assign.get(s) != buf.id:
                fail(f"buffer {buf.id} lists slot {s}, which is assigned to {mp.assign.get(s)}")
            if mp.infos[s].nbytes > buf.nbytes:
                fail(f"slot {s} needs {mp.infos[s].nbytes} bytes but buffer {buf.id} has {buf.nbytes}")
            placed.append((s, buf.offset, buf.offset + mp.infos[s].nbytes))
    placed.sort(key=lambda p: start[p[0]])
    for k, (u, ulo, uhi) in enumerate(placed):
        for v, vlo, vhi in placed[k + 1:]:
            if ulo >= vhi or vlo >= uhi or uhi == ulo or vhi == vlo:
                continue  # no byte in common
            i = start[v]
            exact = ulo == vlo and uhi == vhi
            if mp.mode == SEQUENTIAL:
                if end[u] < i:
                    continue
                if end[u] == i and exact and _inplace_ok(steps[i], u, v, mp.infos, closure):
                    continue
            else:
                rest = touch[u] & ~(1 << i)
                if not rest & ~anc[i] and (not touch[u] >> i & 1 or (exact and _inplace_ok(steps[i], u, v, mp.infos,
                                                                                             closure))):
                    continue
            fail(f"{mp.infos[u].label} (slot {u}, steps {start[u]}-{end[u]}, bytes {ulo}-{uhi}) and "
                 f"{mp.infos[v].label} (slot {v}, written at step {i}, bytes {vlo}-{vhi}) share memory while both "
                 "may be alive")
    return mp
