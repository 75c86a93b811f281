"""Running a graph: compile the needed nodes into a flat plan of kernel calls over numbered slots.

A `Plan` is what later passes (fusion, memory planning, the parallel engine) rewrite: a list of
steps, each a kernel with input slots, attributes and output slots, plus the slots to free after
each step so intermediates die as soon as nothing needs them.
"""

from __future__ import annotations

import numpy as np

from ember.errors import DataDependentError, fmt_shape
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, Value


class Step:
    """One kernel call: out_slots = kernel(xp, *env[in_slots], **attrs)."""

    __slots__ = ("node", "kernel", "backend", "in_slots", "attrs", "out_slots", "free_after", "multi")

    def __init__(self, node, kernel, backend, in_slots, attrs, out_slots, multi) -> None:
        self.node = node
        self.kernel = kernel
        self.backend = backend
        self.in_slots = in_slots
        self.attrs = attrs
        self.out_slots = out_slots
        self.free_after = ()
        self.multi = multi

    def __repr__(self) -> str:
        return f"<step {self.node.op_name} {self.in_slots}->{self.out_slots}>"


class Plan:
    """The compiled form of (graph, outputs): slots for values and steps that fill them."""

    def __init__(self, graph, outputs, extra_nodes=()) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        nodes = graph.needed_for(self.outputs + list(extra_nodes))
        self.nodes = nodes
        self.slot_of: dict = {}
        self.n_slots = 0
        self.consts: list = []  # (slot, value) preloaded before every run
        self.placeholders: list = []  # (slot, value)
        self.captures: list = []  # (slot, tensor)
        self.variables: list = []  # (slot, variable)
        self.steps: list[Step] = []
        for node in nodes:
            self._compile(node)
        self.out_slots = [self._slot_for_output(v) for v in self.outputs]
        self._plan_frees()

    def _new_slot(self) -> int:
        self.n_slots += 1
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
                s = self._new_slot()
                self.slot_of[v] = s
                outs.append(s)
            backend = node.outputs[0].device.backend if node.outputs else None
            kernel = getattr(node.op, "run_kernel", None) or node.op.kernel
            self.steps.append(
                Step(node, kernel, backend, tuple(in_slots), node.attrs, tuple(outs), len(node.outputs) != 1)
            )
            return
        v = node.outputs[0]
        s = self._new_slot()
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
            step.free_after = tuple(frees.get(i, ()))

    # --- running ---------------------------------------------------------------------
    def run(self, feeds: dict) -> list:
        """Execute with `feeds` (Value -> backend array); returns the output arrays."""
        env = [None] * self.n_slots
        for s, c in self.consts:
            env[s] = c
        for s, v in self.placeholders:
            try:
                env[s] = feeds[v]
            except KeyError:
                name = v.node.name or f"%{v.node.id}"
                raise ValueError(
                    f"placeholder {name!r} (shape {fmt_shape(v.shape)}, {v.dtype.name}) is needed for this "
                    "run but was not fed"
                ) from None
        for s, t in self.captures:
            data = t._data
            if isinstance(data, Value):
                raise RuntimeError(f"a captured tensor of shape {fmt_shape(t.shape)} is still symbolic at run time")
            env[s] = data
        for s, var in self.variables:
            env[s] = var.read_storage()
        step = None
        try:
            for step in self.steps:
                args = [env[i] for i in step.in_slots]
                backend = step.backend
                if backend.direct:
                    out = step.kernel(np, *args, **step.attrs)
                else:
                    out = backend.run(step.kernel, args, step.attrs)
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
            node = step.node if step is not None else None
            where = f"{node.op_name} (node %{node.id})" if node is not None else "graph"
            raise RuntimeError(f"{where} failed while running the graph: {type(e).__name__}: {e}") from e
        return [_as_array(env[s]) for s in self.out_slots]

    def __len__(self) -> int:
        return len(self.steps)


def _as_array(x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x
