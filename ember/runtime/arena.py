"""Arenas: the planned buffers of a plan, allocated once from the caching pool and reused every run.

An arena is one raw block laid out by the memory plan (each buffer at its offset), and for each step
with an `out=` kernel the view (shape and dtype of its result) into its buffer, made once. A plan keeps a few arenas so runs
in several threads at once never share one.
"""

from __future__ import annotations

from ember.runtime.allocator import pool
from ember.runtime.memory import writes_into_buffer


class Arena:
    """Preallocated result buffers for the steps of one plan under one memory plan."""

    __slots__ = ("outs", "nbytes", "_raw")

    def __init__(self, plan, mem) -> None:
        raw = None
        outs: list = [None] * len(plan.steps)
        for k, step in enumerate(plan.steps):
            if not step.out_slots or not writes_into_buffer(step, step.out_slots[0]):
                continue
            s = step.out_slots[0]
            b = mem.assign.get(s)
            if b is None:
                continue
            info = mem.infos[s]
            if raw is None:
                raw = pool.raw(mem.peak_bytes)
            off = mem.buffers[b].offset
            outs[k] = raw[off:off + info.nbytes].view(info.dtype).reshape(info.shape)
        self.outs = outs
        self._raw = raw
        self.nbytes = 0 if raw is None else mem.peak_bytes
