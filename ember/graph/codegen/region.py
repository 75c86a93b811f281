"""A fused region: the small straight-line program a fused kernel computes, independent of any renderer.

Instructions read region inputs, earlier instructions and Python scalars; each carries the dtype its
operands are converted to (`compute`) and its result dtype, both taken from the graph's specs, so
every renderer reproduces the unfused chain's promotion exactly. An optional trailing reduction
(sum/mean over dims) consumes one instruction. `evaluate` runs the region with the ops' own kernels:
it is the reference every renderer must match and the path for backends with no renderer.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np

from ember.op import OPS
from ember.ops._rules import broadcast_shapes


class Arg(NamedTuple):
    """An operand: kind "in" (region input k), "t" (instruction k) or "c" (a Python scalar)."""

    kind: str
    ref: object


class Instr(NamedTuple):
    """One elementwise op: result = op(args, **attrs), computed in `compute`, stored as `dtype`."""

    op: str
    args: tuple
    attrs: tuple  # sorted (name, value) pairs
    compute: np.dtype
    dtype: np.dtype


class Reduce(NamedTuple):
    """A trailing reduction of instruction `arg` over `dims` (normalised, sorted)."""

    op: str  # "sum" or "mean"
    arg: int
    dims: tuple
    keepdim: bool
    dtype: np.dtype


def _literal(v) -> str:
    return f"{type(v).__name__}:{float(v).hex() if isinstance(v, float) else v!r}"


class Region:
    """Inputs (dtype, ndim), instructions, outputs (instruction indices) and an optional reduction.

    With a reduction, output 0 of the fused node is the reduced value and the instructions in
    `outputs` follow it as extra elementwise outputs.
    """

    def __init__(self, inputs, instrs, outputs, reduce: Reduce | None = None, dynamic: bool = False) -> None:
        self.inputs = tuple((np.dtype(d), int(nd)) for d, nd in inputs)
        self.instrs = tuple(instrs)
        self.outputs = tuple(outputs)
        self.reduce = reduce
        self.dynamic = dynamic  # some dimension is unknown until run time: check shapes then
        self.text = self._canonical()
        self.key = hashlib.sha256(self.text.encode()).hexdigest()[:20]
        self.compiled: dict = {}  # renderer name (and ("setting", backend setting)) -> kernel
        self.cones = self._cones()

    # --- identity ------------------------------------------------------------------------------
    def _canonical(self) -> str:
        lines = [f"in{k}: {d.name}[{nd}]" for k, (d, nd) in enumerate(self.inputs)]
        for j, ins in enumerate(self.instrs):
            args = ", ".join(f"{a.kind}{a.ref}" if a.kind != "c" else _literal(a.ref) for a in ins.args)
            attrs = ", ".join(f"{k}={_literal(v) if isinstance(v, (int, float)) else v!r}" for k, v in ins.attrs)
            lines.append(f"t{j} = {ins.op}({args}; {attrs}) : {ins.compute.name} -> {ins.dtype.name}")
        if self.reduce is not None:
            r = self.reduce
            lines.append(f"reduce {r.op}(t{r.arg}, dims={r.dims}, keepdim={r.keepdim}) -> {r.dtype.name}")
        lines.append("out " + ", ".join(f"t{j}" for j in self.outputs))
        return "\n".join(lines)

    def __repr__(self) -> str:
        names = [ins.op for ins in self.instrs] + ([self.reduce.op] if self.reduce else [])
        return f"<region {'+'.join(names)} #{self.key[:8]}>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Region) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    @property
    def op_names(self) -> set:
        """The ops the region uses (reduction included)."""
        return {ins.op for ins in self.instrs} | ({self.reduce.op} if self.reduce else set())

    @property
    def output_dtypes(self) -> list:
        """Result dtypes in the fused node's output order."""
        head = [self.reduce.dtype] if self.reduce is not None else []
        return head + [self.instrs[j].dtype for j in self.outputs]

    def _cones(self) -> list:
        """For each elementwise output (and the reduced value), the region inputs it reads."""
        deps: list = []
        for ins in self.instrs:
            s = set()
            for a in ins.args:
                if a.kind == "in":
                    s.add(a.ref)
                elif a.kind == "t":
                    s |= deps[a.ref]
            deps.append(frozenset(s))
        head = [deps[self.reduce.arg]] if self.reduce is not None else []
        return head + [deps[j] for j in self.outputs]

    # --- shape rule and reference evaluation --------------------------------------------------
    def _run(self, values, elementwise, reduce):
        tmps: list = []
        for ins in self.instrs:
            args = [values[a.ref] if a.kind == "in" else tmps[a.ref] if a.kind == "t" else a.ref for a in ins.args]
            tmps.append(elementwise(OPS[ins.op], args, dict(ins.attrs)))
        outs = [tmps[j] for j in self.outputs]
        if self.reduce is not None:
            r = self.reduce
            outs.insert(0, reduce(OPS[r.op], tmps[r.arg], {"dim": r.dims, "keepdim": r.keepdim}))
        return outs

    def infer(self, specs) -> list:
        """Output specs from input specs, by the member ops' own shape rules."""
        return self._run(
            specs,
            lambda op, args, attrs: op.infer(*args, **attrs),
            lambda op, x, attrs: op.infer(x, **attrs),
        )

    def evaluate(self, xp, arrays) -> list:
        """The outputs computed op by op with each op's kernel (the unfused semantics)."""
        return self._run(
            arrays,
            lambda op, args, attrs: op.kernel(xp, *args, **attrs),
            lambda op, x, attrs: op.kernel(xp, x, **attrs),
        )

    def shapes_agree(self, arrays) -> bool:
        """Whether every output really has the iteration shape (checked when dims were unknown)."""
        full = broadcast_shapes("fused", *(a.shape for a in arrays))
        return all(broadcast_shapes("fused", *(arrays[k].shape for k in cone)) == full for cone in self.cones if cone)
