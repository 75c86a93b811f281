"""Dynamic batch sizes for ember.jit: one trace serves every size of the arguments' first dimension.

When a function is called again with only the first dimension of some arguments changed (a last,
shorter batch), it is traced once more with that dimension symbolic (`ember.symbolic.SymInt`,
named "B"), and the resulting program runs for any size B for which the decisions made while
tracing still hold (its guards) and every op's shape rule, re-run for B, gives the shapes the
program was built with. A size that fails either check is traced as an ordinary static program.
Per size, the plan is specialised (attributes and memory plan evaluated for B), not retraced.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ember.backends.meta import MetaArray
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, Value
from ember.symbolic import bind, guards_hold

SIZE = "B"  # the name of the symbolic size
_SPECIALISED = 16  # plans kept per dynamic program (sizes seen)


def batch_leaves(old_key, new_key):
    """The argument leaves whose first dimension alone differs between two cache keys (one size
    for all of them in each key), or None when the keys differ in anything else."""
    if old_key[0] != new_key[0] or old_key[2:] != new_key[2:] or len(old_key[1]) != len(new_key[1]):
        return None
    leaves, sizes = [], set()
    for i, (a, b) in enumerate(zip(old_key[1], new_key[1])):
        if a == b:
            continue
        (sa, *ra), (sb, *rb) = a, b
        if len(sa) != len(sb) or not sa or sa[1:] != sb[1:] or ra != rb:
            return None
        leaves.append(i)
        sizes.add((sa[0], sb[0]))
    return tuple(leaves) if leaves and len(sizes) == 1 else None


def size_of(key, leaves) -> int | None:
    """The first-dimension size shared by `leaves` in a call's key (None if they disagree)."""
    sizes = {key[1][i][0][0] for i in leaves}
    return sizes.pop() if len(sizes) == 1 else None


def generalise(key, leaves):
    """A key with the first dimension of `leaves` replaced by the size's name (what a dynamic program serves)."""
    leaf_keys = list(key[1])
    for i in leaves:
        shape, *rest = leaf_keys[i]
        leaf_keys[i] = ((SIZE,) + tuple(shape[1:]), *rest)
    return (key[0], tuple(leaf_keys)) + tuple(key[2:])


class DynamicProgram:
    """A program traced with a symbolic batch size, and its plans specialised per size."""

    def __init__(self, entry, leaves: tuple, guards: list) -> None:
        self.entry = entry  # the traced _Compiled (its plan has symbolic sizes)
        self.leaves = leaves
        self.guards = guards
        self.plans: OrderedDict = OrderedDict()  # size -> specialised Plan, or None when invalid

    def plan_for(self, size: int):
        """The plan for batch size `size`, or None when the program does not hold for it."""
        if size in self.plans:
            self.plans.move_to_end(size)
            return self.plans[size]
        env = {SIZE: size}
        base = self.entry.plan
        plan = base.specialize(env) if guards_hold(self.guards, env) and shapes_hold(base, env) else None
        self.plans[size] = plan
        while len(self.plans) > _SPECIALISED:
            self.plans.popitem(last=False)
        return plan


def shapes_hold(plan, env: dict) -> bool:
    """Whether every node of `plan`, its shape rule re-run for the sizes in `env`, gives the shapes
    the program was built with (evaluated for `env`): a size read in a way no guard recorded
    (a C extension taking the int's value) shows up here as a mismatch."""
    specs: dict = {}

    def spec_of(x):
        if isinstance(x, Value):
            return specs[x]
        return bind(x, env)

    try:
        for node in plan.nodes:
            if node.kind == "op":
                got = node.op.infer(*(spec_of(x) for x in node.inputs), **bind(node.attrs, env))
                got = got if isinstance(got, tuple) else (got,)
            elif node.kind == CAPTURE:
                t = node.attrs["tensor"]
                got = (MetaArray(tuple(t.shape), t._data.dtype),)
            elif node.kind == CONSTANT:
                arr = node.attrs["value"]
                got = (MetaArray(np.shape(arr), arr.dtype),)
            elif node.kind == PLACEHOLDER:
                got = tuple(MetaArray(bind(v.shape, env), v.dtype) for v in node.outputs)
            else:
                return False
            for v, spec in zip(node.outputs, got):
                if tuple(spec.shape) != tuple(bind(v.shape, env)) or np.dtype(spec.dtype) != v.dtype:
                    return False
                specs[v] = MetaArray(tuple(spec.shape), spec.dtype)
    except Exception:  # noqa: BLE001 - a rule that refuses these sizes: the program does not hold
        return False
    return True
