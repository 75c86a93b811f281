"""Elementwise fusion: the decision of which nodes share one generated kernel (code is in ember.graph.codegen).

A region is a set of elementwise nodes with one output shape (inputs may broadcast into it), grown
from the last unassigned node towards its producers and consumers. A node joins only if the region
stays convex (no path leaves the region and comes back, which would make the fused node depend on
itself). Members whose values are read outside the region (or are graph outputs) become extra
outputs of the fused node rather than being recomputed (paths through control dependencies count as
paths). Two regions, each convex, can still need each other; the later one found is then left
unfused. One trailing `sum`/`mean` of a member may join too. Each region becomes one `fused_elementwise` node whose shape rule re-runs the member
ops' rules, so specs are unchanged.
"""

from __future__ import annotations

import heapq

import numpy as np

from ember.graph.codegen import FUSED, Arg, Instr, Reduce, Region
from ember.graph.codegen.renderer import fits
from ember.graph.ir import Graph, Value
from ember.graph.passes.rewrite import Rewriter, control_targets, is_stateful, users_of
from ember.ops._rules import binary_dtype, float_of, norm_dims
from ember.ops.elementwise import BinaryOp, UnaryOp
from ember.symbolic import has_symbols

_DEVICES = ("cpu", "meta")  # where a renderer exists (meta: to inspect the optimised graph)
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_REDUCTIONS = ("sum", "mean")
MAX_REGION = 64  # members; bounds generated code size and compile time
MAX_SCALAR_REGION = 512  # members of merged 0-d regions, which run as NumPy scalar code (nothing to compile)


def compute_dtype(node) -> np.dtype:
    """The dtype the unfused op converts its operands to before computing."""
    op, out = node.op, node.outputs[0]
    if isinstance(op, BinaryOp):
        dtype = binary_dtype(node.inputs[0], node.inputs[1])
        return float_of(dtype) if op.result == "float" else np.dtype(dtype)
    if isinstance(op, UnaryOp):
        x = node.inputs[0]
        return float_of(x.dtype) if op.float_only else np.dtype(x.dtype)
    return np.dtype(out.dtype)


class _Analysis:
    """Users, candidates and reachability queries over the graph being fused."""

    def __init__(self, graph: Graph, outputs: list) -> None:
        self.graph = graph
        self.users = users_of(graph)
        self.outputs = set(outputs)
        self.control = control_targets(graph)
        self.waiting: dict = {}  # node id -> the nodes that wait for it through control dependencies
        for n in graph.nodes:
            for c in n.control_inputs:
                self.waiting.setdefault(c.id, []).append(n)
        self.cand = {n.id for n in graph.nodes if self._candidate(n)}

    def _candidate(self, n) -> bool:
        if n.kind != "op" or not getattr(n.op, "elementwise", False) or is_stateful(n):
            return False
        if len(n.outputs) != 1 or n.control_inputs or n.id in self.control:
            return False
        out = n.outputs[0]
        if out.device.type not in _DEVICES or out.dtype.kind not in "biuf":
            return False
        if any(isinstance(x, Value) and x.dtype.kind not in "biuf" for x in n.inputs):
            return False
        try:
            compute = compute_dtype(n)
        except (TypeError, ValueError):
            return False
        for x in n.inputs:
            if not isinstance(x, Value) and (not isinstance(x, _SCALARS) or not fits(x, compute)):
                return False
        if has_symbols(n.inputs) or has_symbols(n.attrs):  # generated code would bake a size in
            return False
        return all(v is None or isinstance(v, _SCALARS) for v in n.attrs.values() if not isinstance(v, np.dtype))

    def consumers(self, node) -> list:
        """The nodes that read node's values or wait for it (a path through either must not leave a region
        and come back)."""
        return [u for v in node.outputs for u, _ in self.users.get(v, ())] + self.waiting.get(node.id, [])

    def producers(self, node) -> list:
        return [x.node for x in node.inputs if isinstance(x, Value)]

    def _reaches(self, start, members, step, inside) -> bool:
        stack = [n for n in start if n.id not in members]
        seen = set()
        while stack:
            n = stack.pop()
            if n.id in members:
                return True
            if n.id in seen or not inside(n.id):
                continue
            seen.add(n.id)
            stack.extend(step(n))
        return False

    def convex_with(self, node, members: set) -> bool:
        """Whether adding `node` keeps the region free of paths that leave it and come back."""
        lo, hi = min(members | {node.id}), max(members | {node.id})
        back = self.producers(node) + list(node.control_inputs)
        if self._reaches(back, members, lambda n: self.producers(n) + list(n.control_inputs), lambda i: i >= lo):
            return False
        fwd = self.consumers(node)
        return not self._reaches(fwd, members, self.consumers, lambda i: i <= hi)

    def convex(self, members: set) -> bool:
        """Whether no path leaves the set of node ids `members` and comes back into it."""
        hi = max(members)
        out = [c for i in members for c in self.consumers(self.graph.nodes[i]) if c.id not in members]
        return not self._reaches(out, members, self.consumers, lambda i: i <= hi)

    def external(self, node, members: set) -> bool:
        """Whether node's value is needed outside the region."""
        v = node.outputs[0]
        return v in self.outputs or any(u.id not in members for u, _ in self.users.get(v, ()))


def _grow(a: _Analysis, root, assigned: set) -> set:
    """The region grown from `root` over same-shaped candidate neighbours."""
    shape, device = root.outputs[0].shape, root.outputs[0].device
    members = {root.id}
    work = a.producers(root) + a.consumers(root)
    while work and len(members) < MAX_REGION:
        n = work.pop()
        if n.id in members or n.id in assigned or n.id not in a.cand:
            continue
        out = n.outputs[0]
        if out.shape != shape or out.device is not device or not a.convex_with(n, members):
            continue
        members.add(n.id)
        work += a.producers(n) + a.consumers(n)
    return members


def _trailing_reduction(a: _Analysis, members: set, assigned: set):
    """A sum/mean reading a member, that can join the region (or None)."""
    for i in sorted(members):
        node = a.graph.nodes[i]
        for u in a.consumers(node):
            if u.kind != "op" or u.op.name not in _REDUCTIONS or u.id in assigned or u.id in members:
                continue
            if set(u.attrs) - {"dim", "keepdim"} or u.control_inputs or u.id in a.control or len(u.inputs) != 1:
                continue
            if u.outputs[0].dtype.kind not in "biuf" or not a.convex_with(u, members):
                continue
            return u
    return None


def _build_region(a: _Analysis, members: list, reduction) -> tuple:
    """The Region for sorted member nodes, its input values and the values its outputs replace."""
    ids = {n.id for n in members} | ({reduction.id} if reduction is not None else set())
    index = {n.id: j for j, n in enumerate(members)}
    inputs: list = []
    pos: dict = {}
    instrs = []
    for n in members:
        args = []
        for x in n.inputs:
            if isinstance(x, Value) and x.node.id in index:
                args.append(Arg("t", index[x.node.id]))
            elif isinstance(x, Value):
                if x not in pos:
                    pos[x] = len(inputs)
                    inputs.append(x)
                args.append(Arg("in", pos[x]))
            else:
                args.append(Arg("c", x))
        attrs = tuple(sorted(n.attrs.items()))
        instrs.append(Instr(n.op.name, tuple(args), attrs, compute_dtype(n), np.dtype(n.outputs[0].dtype)))
    outs = [j for j, n in enumerate(members) if a.external(n, ids)]
    replaced = [members[j].outputs[0] for j in outs]
    red = None
    if reduction is not None:
        x = reduction.inputs[0]
        dims = norm_dims(reduction.op.name, reduction.attrs.get("dim"), len(x.shape))
        red = Reduce(reduction.op.name, index[x.node.id], dims, bool(reduction.attrs.get("keepdim", False)),
                     np.dtype(reduction.outputs[0].dtype))
        replaced.insert(0, reduction.outputs[0])
    dynamic = any(d is None for n in members for d in n.outputs[0].shape)
    region = Region([(v.dtype, len(v.shape)) for v in inputs], instrs, outs, red, dynamic)
    return region, inputs, replaced


def _specs_match(region: Region, inputs: list, replaced: list) -> bool:
    try:
        specs = region.infer(inputs)
    except Exception:  # noqa: BLE001 - a region the shape rules reject is simply not fused
        return False
    return all(tuple(s.shape) == v.shape and np.dtype(s.dtype) == v.dtype for s, v in zip(specs, replaced))


def find_regions(graph: Graph, outputs: list) -> tuple:
    """The fusion decision: the analysis and, per region worth fusing, (member nodes, trailing reduction or None)."""
    a = _Analysis(graph, outputs)
    assigned: set = set()
    regions = []
    for node in reversed(graph.nodes):
        if node.id not in a.cand or node.id in assigned:
            continue
        members = _grow(a, node, assigned)
        reduction = _trailing_reduction(a, members, assigned)
        if len(members) + (reduction is not None) < 2:
            continue
        assigned |= members | ({reduction.id} if reduction is not None else set())
        regions.append(([graph.nodes[i] for i in sorted(members)], reduction))
    return a, _merge_scalar_regions(a, regions, assigned)


def _merge_scalar_regions(a: _Analysis, regions: list, assigned: set) -> list:
    """Horizontal fusion of 0-d work: independent 0-d regions (and lone 0-d ops) become one region when the
    union stays convex. An optimizer's per-parameter step counts and bias corrections were one kernel call
    per parameter (9 us each, 30 in a transformer step) though no region reads another's values."""
    def is_scalar(node) -> bool:
        return node.outputs[0].shape == ()

    def live(members) -> bool:  # a dead chain (DCE not run first) is left as it is, not merged into live work
        ids = {n.id for n in members}
        return any(a.external(n, ids) for n in members)

    scalar = [r for r in regions if r[1] is None and is_scalar(r[0][0]) and live(r[0])]
    scalar += [([n], None) for n in a.graph.nodes
               if n.id in a.cand and n.id not in assigned and is_scalar(n) and live([n])]
    if len(scalar) < 2:
        return regions
    groups: list = []  # (device, member ids)
    for members, _ in sorted(scalar, key=lambda r: r[0][-1].id):
        ids = {n.id for n in members}
        device = members[0].outputs[0].device
        for dev, group in groups:
            if dev is device and len(group) + len(ids) <= MAX_SCALAR_REGION and a.convex(group | ids):
                group |= ids
                break
        else:
            groups.append((device, ids))
    merged = [([a.graph.nodes[i] for i in sorted(ids)], None) for _, ids in groups if len(ids) > 1]
    merged_ids = {i for _, ids in groups if len(ids) > 1 for i in ids}
    return [r for r in regions if r[0][0].id not in merged_ids] + merged


def whole_region(graph: Graph, outputs: list, order: list) -> tuple:
    """Every op of `graph` as one Region, and the values it reads: those of `order` it needs, in that order. Its
    outputs are `outputs` in their order (each computed by an op of the graph, all of one shape).

    For a small program generated once, such as an optimizer's per-parameter update (optim/fused.py). Its
    0-d arithmetic joins the loop too: the renderer reads 0-d inputs as single values, and the compiler hoists
    what depends on them alone out of the loop. Raises ValueError naming what cannot join."""
    a = _Analysis(graph, outputs)
    members = [n for n in graph.nodes if n.kind == "op"]
    for n in members:
        if n.id not in a.cand:
            raise ValueError(f"{n.op.name} (node %{n.id}) cannot be part of a fused elementwise kernel")
    ids = {n.id for n in members}
    for v in outputs:
        if not isinstance(v, Value) or v.node.id not in ids:
            raise ValueError(f"output {v!r} is not computed by an op of the graph")
    if len({v.shape for v in outputs}) != 1:
        raise ValueError(f"the outputs have several shapes: {[v.shape for v in outputs]}")
    region, inputs, replaced = _build_region(a, members, None)
    missing = [v for v in inputs if v not in order]
    if missing:
        raise ValueError(f"the program reads {missing[0]!r}, which is not among the inputs given")
    wanted = [v for v in order if v in inputs]
    moved = {("in", inputs.index(v)): Arg("in", k) for k, v in enumerate(wanted)}
    instrs = [ins._replace(args=tuple(moved.get(tuple(x), x) for x in ins.args)) for ins in region.instrs]
    outs = [region.outputs[replaced.index(v)] for v in outputs]
    return Region([(v.dtype, len(v.shape)) for v in wanted], instrs, outs), wanted


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` where each fusible region is one fused_elementwise node."""
    a, found = find_regions(graph, outputs)
    built: dict = {}  # key -> (region, inputs, replaced, ids)
    for members, reduction in found:
        region, inputs, replaced = _build_region(a, members, reduction)
        if not replaced or not _specs_match(region, inputs, replaced):
            continue  # a dead chain (nothing reads it: when DCE has not run first) stays as it is
        ids = [n.id for n in members] + ([reduction.id] if reduction is not None else [])
        built[max(ids)] = (region, inputs, replaced, ids)
    while True:
        units, order = _order_units(graph, built)
        if len(order) == len(units):
            break
        # Each region is convex on its own, but two regions can still need each other (a value of one
        # feeds the other both ways round); keep the first stuck region's nodes unfused and order again.
        placed = set(order)
        del built[min(k for k in units if k not in placed and units[k][0] == "region")]
    rw = Rewriter(graph)
    for k in order:
        unit = units[k]
        if unit[0] == "node":
            rw.copy(unit[1])
        else:
            _, region, inputs, replaced, _ids = unit
            device = replaced[0].device
            outs = rw.add_op(FUSED, [rw.value(v) for v in inputs], {"region": region}, device)
            outs = outs if isinstance(outs, tuple) else (outs,)
            for old, new in zip(replaced, outs):
                rw.alias(old, new)
    return rw.graph, rw.outputs(outputs), rw.vmap


def _order_units(graph: Graph, built: dict) -> tuple:
    """(units, their keys in a topological order keeping the original order where dependencies allow); the
    order is short of the units when regions depend on each other in a cycle."""
    unit_of: dict = {}  # node id -> unit key
    units: dict = {}  # key -> ("node", node) | ("region", region, inputs, replaced, ids)
    for key, (region, inputs, replaced, ids) in built.items():
        units[key] = ("region", region, inputs, replaced, ids)
        for i in ids:
            unit_of[i] = key
    for n in graph.nodes:
        if n.id not in unit_of:
            unit_of[n.id] = n.id
            units[n.id] = ("node", n)
    deps: dict = {k: set() for k in units}
    for n in graph.nodes:
        k = unit_of[n.id]
        for p in [x.node for x in n.inputs if isinstance(x, Value)] + list(n.control_inputs):
            if unit_of[p.id] != k:
                deps[k].add(unit_of[p.id])
    waiting = {k: len(d) for k, d in deps.items()}
    rdeps: dict = {}
    for k, d in deps.items():
        for p in d:
            rdeps.setdefault(p, []).append(k)
    ready = [k for k, c in waiting.items() if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for nxt in rdeps.get(k, ()):
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, nxt)
    return units, order
