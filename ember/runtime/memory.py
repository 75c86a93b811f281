"""Memory planning for graph plans: liveness, buffer sharing, in-place reuse, and its validator.

Every intermediate value that a step can write into given memory (its op has an `out=` kernel on a
backend that runs NumPy arrays directly) gets a buffer; the rest are allocated by their kernels at run
time and are only counted, so the arena holds exactly what runs use. An elementwise step whose input dies there
(same shape and dtype, not a view, not a graph input or output) writes its result over that input,
continuing the input's buffer; any other value starts a buffer. The buffers are then packed into
one arena, largest first, each at the lowest offset not used by a buffer alive at the same time,
so memory whose values are dead is reused. Values that may alias other values (views, and results
of ops that may return an input) keep the storage they may alias alive as long as they live. Graph
inputs, outputs and whatever they may alias are never planned.

`sequential` plans follow the step order. In `parallel` plans two values share memory only when
every step using the earlier one is an ancestor (by data dependencies) of the step writing the
later one, so they stay valid however the dependency engine interleaves independent branches.
"""

from __future__ import annotations

import numpy as np

from ember.errors import fmt_shape

SEQUENTIAL = "sequential"
PARALLEL = "parallel"
_TABLE_VALUES = 6  # values listed per buffer in MemoryPlan.table()


class SlotInfo:
    """What the planner knows about one slot of a plan."""

    __slots__ = ("slot", "kind", "shape", "dtype", "nbytes", "producer", "readers", "own", "alias_of", "label")

    def __init__(self, slot: int, kind: str) -> None:
        self.slot = slot
        self.kind = kind  # placeholder | capture | constant | variable | scalar | step
        self.shape = None
        self.dtype = None
        self.nbytes = None  # None: unknown size (or not an array)
        self.producer = -1  # step index for kind "step"
        self.readers: list = []  # step indices that read the slot
        self.own = True  # False for views: they use their source's storage
        self.alias_of: tuple = ()  # slots whose storage this value may share
        self.label = ""

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"


def writes_into_buffer(step, slot: int) -> bool:
    """Whether a step can put its result in `slot` in planned memory: an `out=` kernel, NumPy arrays, and the result
    its only one or (a multi-output op's `out=` kernel writes its first) its first."""
    if step.kernel_out is None or step.backend is None or not step.backend.direct:
        return False
    return not step.multi or slot == step.out_slots[0]


def is_fresh(op) -> bool:
    """Whether an op's results never share memory with its inputs (what the op declares)."""
    return op.fresh_output or op.kernel_out is not None


def analyze(plan) -> list:
    """Per-slot facts: kind, spec, producer, readers and possible aliasing."""
    infos: list = [None] * plan.n_slots
    for s, c in plan.consts:
        info = infos[s] = SlotInfo(s, "constant" if isinstance(c, np.ndarray) else "scalar")
        if isinstance(c, np.ndarray):
            _set_spec(info, c.shape, c.dtype)
    for kind, pairs in (("placeholder", plan.placeholders), ("capture", plan.captures), ("variable", plan.variables)):
        for s, _ in pairs:
            info = infos[s] = SlotInfo(s, kind)
            v = plan.slot_value[s]
            if v is not None:
                _set_spec(info, v.shape, v.dtype)
    for i, step in enumerate(plan.steps):
        for s in step.in_slots:
            infos[s].readers.append(i)
        op = step.node.op
        arrays = [s for s in step.in_slots if infos[s].is_array]
        for s in step.out_slots:
            info = infos[s] = SlotInfo(s, "step")
            info.producer = i
            v = plan.slot_value[s]
            _set_spec(info, v.shape, v.dtype)
            info.label = f"%{step.node.id} {op.name}"
            if op.is_view is True:
                info.own = False
                info.alias_of = tuple(arrays[:1])
            elif op.is_view:
                info.alias_of = tuple(arrays[:1])
            elif not is_fresh(op):
                info.alias_of = tuple(dict.fromkeys(arrays))
    return infos


def _set_spec(info: SlotInfo, shape, dtype) -> None:
    info.shape = tuple(shape)
    info.dtype = np.dtype(dtype)
    if all(isinstance(d, (int, np.integer)) for d in info.shape):
        n = info.dtype.itemsize
        for d in info.shape:
            n *= int(d)
        info.nbytes = n


def _roots(infos: list) -> list:
    """For each slot, the storage-owning slots it may share memory with (itself included if it owns)."""
    roots: list = [frozenset()] * len(infos)
    for info in infos:  # slots of step outputs come after their inputs' slots
        if info is None or not info.is_array:
            continue
        r = {info.slot} if info.own else set()
        for a in info.alias_of:
            r |= roots[a]
        roots[info.slot] = frozenset(r)
    return roots


def ancestors(plan) -> list:
    """For each step, a bitset (int) of the steps that must finish before it starts."""
    producer: dict = {}
    step_of_node: dict = {}
    anc: list = []
    for i, step in enumerate(plan.steps):
        bits = 0
        for s in step.in_slots:
            p = producer.get(s)
            if p is not None:
                bits |= anc[p] | (1 << p)
        for c in step.node.control_inputs:
            p = step_of_node.get(c.id)
            if p is not None:
                bits |= anc[p] | (1 << p)
        anc.append(bits)
        for s in step.out_slots:
            producer[s] = i
        step_of_node.setdefault(step.node.id, i)
    return anc


class Buffer:
    """One planned buffer: its size and the values that take turns in it."""

    __slots__ = ("id", "nbytes", "offset", "values", "busy_until", "users")

    def __init__(self, id_: int) -> None:
        self.id = id_
        self.nbytes = 0
        self.offset = 0  # where the buffer starts in the plan's arena
        self.values: list = []  # slots, in order of definition
        self.busy_until = -1  # the last step that uses a value in it
        self.users = 0  # bitset of the steps that use a value in it


class MemoryPlan:
    """The buffers of a plan, which value sits in which, and what that saves."""

    def __init__(self, plan, mode: str) -> None:
        self.plan = plan
        self.mode = mode
        self.infos: list = []
        self.buffers: list[Buffer] = []
        self.assign: dict = {}  # slot -> buffer id
        self.inplace: list = []  # (step index, input slot, output slot)
        self.last_use: dict = {}  # root slot -> last step that may touch its storage
        self.pinned: set = set()  # root slots not planned: I/O and their aliases, kernel-allocated values
        self.unplanned_bytes = 0
        self.kernel_bytes = 0  # intermediates allocated by kernels without an out= form (not in the arena)
        self.n_kernel_allocated = 0
        self.output_bytes = 0
        self.live_peak_bytes = 0
        self.n_unknown = 0  # intermediates of unknown size, allocated at run time
        self.remat = None  # set by ember.runtime.remat: what rematerialisation kept and saved

    @property
    def peak_bytes(self) -> int:
        """The arena's size: the intermediates' memory with planning (buffers dead at disjoint times overlap)."""
        return max((b.offset + b.nbytes for b in self.buffers), default=0)

    @property
    def buffer_bytes(self) -> int:
        """The buffers' sizes added up (before they are packed into the arena)."""
        return sum(b.nbytes for b in self.buffers)

    @property
    def n_buffers(self) -> int:
        return len(self.buffers)

    @property
    def n_inplace(self) -> int:
        return len(self.inplace)

    @property
    def n_planned(self) -> int:
        return len(self.assign)

    @property
    def saving(self) -> float:
        """1 - planned/unplanned: the fraction of intermediate memory that planning saves."""
        return 1.0 - self.peak_bytes / self.unplanned_bytes if self.unplanned_bytes else 0.0

    def buffer_of(self, slot: int):
        """The buffer id of a planned slot (None if it is not planned)."""
        return self.assign.get(slot)

    def table(self) -> str:
        """One row per buffer: size and the values that use it, with their lifetimes."""
        lines = [f"{'buffer':>6}  {'offset':>12}  {'bytes':>12}  values (step range)"]
        for b in self.buffers:
            vals = []
            for s in b.values[:_TABLE_VALUES]:
                info = self.infos[s]
                last = self.last_use.get(s, info.producer)
                mark = "*" if any(o == s for _, _, o in self.inplace) else ""
                vals.append(f"{info.label}{mark} {info.dtype.name}{fmt_shape(info.shape)} [{info.producer}-{last}]")
            if len(b.values) > _TABLE_VALUES:
                vals.append(f"... {len(b.values) - _TABLE_VALUES} more")
            lines.append(f"{b.id:>6}  {b.offset:>12,}  {b.nbytes:>12,}  " + "; ".join(vals))
        return "\n".join(lines)

    def summary(self) -> str:
        """The headline numbers in a few lines."""
        lines = [
            f"memory plan ({self.mode}) for {len(self.plan.steps)} steps:",
            f"  intermediates unplanned: {_fmt_bytes(self.unplanned_bytes)} in {self.n_planned} values",
            f"  planned peak:            {_fmt_bytes(self.peak_bytes)} ({self.saving * 100:.0f}% saved; "
            f"live lower bound {_fmt_bytes(self.live_peak_bytes)})",
            f"  buffers:                 {self.n_buffers}, {_fmt_bytes(self.buffer_bytes)} before packing",
            f"  allocated by kernels:    {_fmt_bytes(self.kernel_bytes)} in {self.n_kernel_allocated} values "
            "(no out= form; not in the arena)",
            f"  computed in place:       {self.n_inplace} steps",
            f"  outputs (not planned):   {_fmt_bytes(self.output_bytes)}",
        ]
        if self.n_unknown:
            lines.append(f"  unknown sizes (allocated at run time): {self.n_unknown} values")
        if self.remat is not None:
            lines.append("  " + self.remat.describe(self.peak_bytes))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary() + "\n" + self.table()

    def __repr__(self) -> str:
        return (f"<MemoryPlan {self.mode}: peak {self.peak_bytes} of {self.unplanned_bytes} bytes, "
                f"{self.n_buffers} buffers, {self.n_inplace} in place>")


def plan_memory(plan, mode: str = SEQUENTIAL) -> MemoryPlan:
    """Assign a buffer to every intermediate of `plan` that its step can write into memory (see the module docstring)."""
    if mode not in (SEQUENTIAL, PARALLEL):
        raise ValueError(f"memory plan mode must be {SEQUENTIAL!r} or {PARALLEL!r}, got {mode!r}")
    mp = MemoryPlan(plan, mode)
    infos = mp.infos = analyze(plan)
    roots = _roots(infos)
    anc = ancestors(plan) if mode == PARALLEL else None

    # Lifetimes of storage: the last step at which any value that may alias a root is used.
    last: dict = {}
    users: dict = {}
    for info in infos:
        if info is None or not info.is_array:
            continue
        touch = list(info.readers)
        if info.kind == "step":
            touch.append(info.producer)
        end = max(touch) if touch else -1
        bits = 0
        for t in touch:
            bits |= 1 << t
        for r in roots[info.slot]:
            if end > last.get(r, -1):
                last[r] = end
            users[r] = users.get(r, 0) | bits
    pinned = set()
    for s in plan.out_slots:
        pinned |= roots[s]
    for info in infos:
        if info is not None and info.is_array and (info.kind != "step" or info.nbytes is None):
            pinned.add(info.slot)
    mp.last_use = last

    for info in infos:
        if info is None or info.kind != "step" or not info.own:
            continue
        if info.slot in pinned:
            if info.nbytes is None:
                mp.n_unknown += 1
            elif any(info.slot in roots[o] for o in plan.out_slots):
                mp.output_bytes += info.nbytes
            continue
        if not writes_into_buffer(plan.steps[info.producer], info.slot):
            pinned.add(info.slot)  # its kernel allocates it: a buffer for it would sit unused in the arena
            mp.kernel_bytes += info.nbytes
            mp.n_kernel_allocated += 1
            continue
        mp.unplanned_bytes += info.nbytes
    mp.pinned = pinned

    # Buffers: a value either continues the buffer of the input it overwrites in place or starts one.
    buffers = mp.buffers
    for i, step in enumerate(plan.steps):
        op = step.node.op
        for s in step.out_slots:
            info = infos[s]
            if not info.own or s in pinned:
                continue
            b = None
            if op.inplace_ok and len(step.out_slots) == 1:
                hit = _inplace_target(mp, step, i, info, roots, last, anc)
                if hit is not None:
                    b = hit[0]
                    mp.inplace.append((i, hit[1], s))
            if b is None:
                b = len(buffers)
                buffers.append(Buffer(b))
            buf = buffers[b]
            buf.nbytes = max(buf.nbytes, _align(info.nbytes))
            buf.values.append(s)
            buf.busy_until = max(buf.busy_until, last.get(s, i))
            buf.users |= users.get(s, 0) | (1 << i)
            mp.assign[s] = b
    mp.live_peak_bytes = _live_peak(mp, len(plan.steps))
    _pack(mp, users, anc)
    return mp


def _pack(mp: MemoryPlan, users: dict, anc) -> None:
    """Place the buffers in one arena: by size, largest first, each at the lowest offset that no buffer
    alive at the same time (or, in parallel mode, not ordered before or after it) occupies."""
    spans = {}
    for b in mp.buffers:
        spans[b.id] = [(mp.infos[s].producer, mp.last_use.get(s, mp.infos[s].producer), s) for s in b.values]

    def conflict(b1, b2) -> bool:
        for d1, e1, s1 in spans[b1.id]:
            for d2, e2, s2 in spans[b2.id]:
                if anc is None:
                    if d1 <= e2 and d2 <= e1:
                        return True
                elif not (_before(users, anc, s1, d2) or _before(users, anc, s2, d1)):
                    return True
        return False

    placed: list = []
    for b in sorted(mp.buffers, key=lambda b: (-b.nbytes, b.id)):
        busy = sorted((p.offset, p.offset + p.nbytes) for p in placed if conflict(p, b))
        offset = 0
        for lo, hi in busy:
            if offset + b.nbytes <= lo:
                break
            offset = max(offset, _align(hi))
        b.offset = offset
        placed.append(b)


def _before(users: dict, anc: list, s: int, step: int) -> bool:
    """Whether every step using value s finishes before `step` starts, in any valid schedule."""
    return not users.get(s, 0) & ~anc[step]


def _align(n: int) -> int:
    return (n + 63) & ~63


def _live_peak(mp: MemoryPlan, n_steps: int) -> int:
    """The most bytes of planned values alive at one step (a lower bound for any assignment)."""
    live = [0] * (n_steps + 1)
    for buf in mp.buffers:
        occ: dict = {}
        for s in buf.values:
            nb = mp.infos[s].nbytes
            for t in range(mp.infos[s].producer, mp.last_use.get(s, mp.infos[s].producer) + 1):
                if nb > occ.get(t, 0):
                    occ[t] = nb
        for t, nb in occ.items():
            live[t] += nb
    return max(live)


def _inplace_target(mp, step, i, info, roots, last, anc):
    """(buffer id, input slot) of an input this elementwise step may overwrite, or None."""
    ins = step.in_slots
    for x in ins:
        xi = mp.infos[x]
        b = mp.assign.get(x)
        if b is None or roots[x] != frozenset((x,)):
            continue  # not planned, or a value that may alias other storage
        if last.get(x) != i or xi.shape != info.shape or xi.dtype != info.dtype:
            continue
        buf = mp.buffers[b]
        if buf.busy_until != i:
            continue
        if any(y != x and x in roots[y] for y in ins if mp.infos[y].is_array):
            continue  # another operand views x: overwriting x would change it mid-kernel
        if anc is not None and buf.users & ~(anc[i] | (1 << i)):
            continue  # a step that is not ordered before this one still uses the buffer
        return b, x
    return None


def _fmt_bytes(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


# --- validation ----------------------------------------------------------------------------------
def _inplace_ok(step, u, v, infos, closure) -> bool:
    """Whether `step` may write v over its dying input u (elementwise, same spec, no other alias of u)."""
    if not step.node.op.inplace_ok or len(step.out_slots) != 1 or step.out_slots[0] != v:
        return False
    if u not in step.in_slots or infos[u].shape != infos[v].shape or infos[u].dtype != infos[v].dtype:
        return False
    return not any(y != u and u in closure(y) for y in step.in_slots)
