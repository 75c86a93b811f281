"""Plan-level rematerialisation (Chen et al. 2016, "Training deep nets with sublinear memory cost").

In a training plan the forward values that the backward pass reads (activations) stay alive from
the forward pass to the backward pass; that is what grows with depth. With the "sqrt" policy the
activations are cut into about sqrt(n) segments by size; only each segment's last activation is
kept, and the others are recomputed from the kept one just before the backward pass first needs
them. Peak activation memory then grows like sqrt(depth) for chain-like networks, for about one
extra forward pass of compute.

The forward pass is the set of steps the loss depends on (the plan's first output by default);
stateful steps (random draws, variable updates) are never recomputed: their results are kept.
"""

from __future__ import annotations

import math

_RANDOM_WORDS = ("rand", "bernoulli", "dropout", "normal", "multinomial", "uniform", "poisson")


class RematInfo:
    """What rematerialisation did to a plan, for the memory plan's report."""

    def __init__(self, policy: str, n_activations: int, kept: int, recomputed_steps: int,
                 peak_without: int, activation_bytes: int, kept_bytes: int) -> None:
        self.policy = policy
        self.n_activations = n_activations
        self.kept = kept
        self.recomputed_steps = recomputed_steps
        self.peak_without = peak_without  # planned peak bytes of the same plan without remat
        self.activation_bytes = activation_bytes
        self.kept_bytes = kept_bytes

    def describe(self, peak_with: int | None = None) -> str:
        text = (f"rematerialisation ({self.policy}): kept {self.kept} of {self.n_activations} activations "
                f"({self.kept_bytes:,} of {self.activation_bytes:,} bytes), {self.recomputed_steps} steps recomputed; "
                f"planned peak without it {self.peak_without:,} bytes")
        if peak_with is not None:
            text += f", with it {peak_with:,} bytes (saved {self.peak_without - peak_with:,})"
        return text

    def __repr__(self) -> str:
        return f"<RematInfo {self.describe()}>"


def _recomputable(step) -> bool:
    if getattr(step.node.op, "stateful", False):  # random draws, variable updates: once per run only
        return False
    name = step.name.lower()
    return not any(w in name for w in _RANDOM_WORDS)


def rematerialize(plan, policy: str = "sqrt", loss_slot: int | None = None):
    """Rewrite `plan` in place so that only ~sqrt(n) activations live across the backward pass."""
    if policy != "sqrt":
        raise ValueError(f"rematerialize: unknown policy {policy!r} (known: 'sqrt')")
    from ember.runtime.memory import analyze, plan_memory

    steps = plan.steps
    if not steps or not plan.out_slots:
        return None
    infos = analyze(plan)
    producer = {s: i for i, st in enumerate(steps) for s in st.out_slots}
    loss = plan.out_slots[0] if loss_slot is None else loss_slot
    if loss not in producer:
        return None
    fwd = set()
    stack = [producer[loss]]
    while stack:
        i = stack.pop()
        if i in fwd:
            continue
        fwd.add(i)
        stack.extend(producer[s] for s in steps[i].in_slots if s in producer)
    end_fwd = max(fwd)
    outputs = set(plan.out_slots)

    # Activations: forward values read after the forward pass, in forward order.
    acts = []
    for i in sorted(fwd):
        for s in steps[i].out_slots:
            info = infos[s]
            if any(r > end_fwd for r in info.readers) and info.own and info.nbytes:
                acts.append(s)
    if len(acts) < 3:
        return None
    total = sum(infos[s].nbytes for s in acts)
    n_seg = max(1, round(math.sqrt(len(acts))))
    budget = total / n_seg
    keep = set(outputs)
    acc = 0
    for s in acts:
        acc += infos[s].nbytes
        if acc >= budget:
            keep.add(s)
            acc = 0
    for i in fwd:  # what cannot be recomputed must be kept
        if not _recomputable(steps[i]):
            keep.update(steps[i].out_slots)
    if all(s in keep for s in acts):
        return None

    peak_without = plan_memory(plan).peak_bytes
    copies: dict = {}  # forward step index -> its recomputed output slots
    inserts: dict = {}  # late step index -> recompute steps to run just before it
    n_recomputed = 0

    def fresh(s: int, before: int) -> int:
        """The slot late steps should read for forward value s (recomputing it if it is not kept)."""
        nonlocal n_recomputed
        i = producer.get(s)
        if i is None or i not in fwd or s in keep:
            return s
        if i not in copies:
            st = steps[i]
            ins = [fresh(x, before) for x in st.in_slots]
            outs = [plan._new_slot(plan.slot_value[o]) for o in st.out_slots]
            copies[i] = dict(zip(st.out_slots, outs))
            inserts.setdefault(before, []).append(st.copy(ins, outs, name=f"{st.name}[recompute]"))
            n_recomputed += 1
        return copies[i][s]

    for j in range(end_fwd + 1, len(steps)):
        st = steps[j]
        if any(producer.get(s) in fwd and s not in keep for s in st.in_slots):
            st.in_slots = tuple(fresh(s, j) for s in st.in_slots)
    if not n_recomputed:
        return None
    new_steps = []
    for j, st in enumerate(steps):
        new_steps.extend(inserts.get(j, ()))
        new_steps.append(st)
    plan.steps = new_steps
    kept = [s for s in acts if s in keep]
    plan.remat = RematInfo(policy, len(acts), len(kept), n_recomputed, peak_without, total,
                           sum(infos[s].nbytes for s in kept))
    return plan.remat
