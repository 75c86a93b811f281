"""Horizontal fusion: fused regions running one program on different operands become one `fused_group` node.

An optimizer step runs the same update for every parameter, and a batch-normalised network the same running
statistics update for every layer: after fusion each is one small fused region per parameter or layer, and
on small tensors the call (Python, dispatch, a cold cache after the convolutions) costs far more than the
loop: 18 us a region inside a ResNet-20 training step, 102 of them per step. Regions with the same program,
each over one full shape (inputs of that shape or single values) of at most `MAX_VALUES` values, are grouped
and run in compiled calls (codegen.run_group), when Numba's loop for the program is not slower than NumPy's
ufuncs per value (so not for tanh or exp, whose NumPy ufuncs are vectorised). A member moves to the position
of the group's last member, so a group only takes members that come before every reader of the members
already in it.
"""

from __future__ import annotations

import math

from ember.graph.codegen import FUSED, FUSED_GROUP, choose_renderer
from ember.graph.ir import Graph, Value
from ember.graph.passes.rewrite import Rewriter, control_targets, static_shape, users_of

MAX_VALUES = 1 << 16  # a larger member's own call costs little beside its loop
MIN_MEMBERS = 2


def _signature(node):
    """What members of one group share (program, which inputs are single values, device), or None when the
    node cannot join a group."""
    if node.kind != "op" or node.op is not FUSED or node.control_inputs:
        return None
    region = node.attrs["region"]
    if region.reduce is not None or region.dynamic or choose_renderer(region).name != "numba":
        return None  # the group runs Numba's loop: not for ops whose NumPy ufuncs are faster (tanh, exp)
    shape = tuple(node.outputs[0].shape)
    if not static_shape(node.outputs[0]) or math.prod(shape) > MAX_VALUES:
        return None
    kinds = []
    for x in node.inputs:
        if not isinstance(x, Value) or not static_shape(x):
            return None
        if tuple(x.shape) == shape:
            kinds.append("full")
        elif math.prod(x.shape) == 1:
            kinds.append("single")
        else:
            return None  # broadcast along some dims: not the flat loop
    return region.key, tuple(kinds), node.outputs[0].device


def find_groups(graph: Graph) -> list:
    """Lists of nodes (in graph order) that may run as one fused_group each."""
    users = users_of(graph)
    waited = control_targets(graph)
    candidates: dict = {}
    for node in graph.nodes:
        sig = _signature(node)
        if sig is not None and node.id not in waited:
            candidates.setdefault(sig, []).append(node)
    groups = []
    for nodes in candidates.values():
        current: list = []
        limit = math.inf  # the first node reading a result of the current group's members
        for node in nodes:
            first_reader = min((u.id for v in node.outputs for u, _ in users.get(v, ())), default=math.inf)
            if current and node.id < limit:
                current.append(node)
                limit = min(limit, first_reader)
                continue
            if len(current) >= MIN_MEMBERS:
                groups.append(current)
            current, limit = [node], first_reader
        if len(current) >= MIN_MEMBERS:
            groups.append(current)
    return groups


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` where each group of like fused regions is one fused_group node."""
    groups = find_groups(graph)
    at_last = {g[-1].id: g for g in groups}
    grouped = {n.id for g in groups for n in g}
    rw = Rewriter(graph)
    for node in graph.nodes:
        if node.id in at_last:
            members = at_last[node.id]
            inputs = [rw.value(x) for n in members for x in n.inputs]
            attrs = {"region": node.attrs["region"], "members": len(members)}
            outs = rw.add_op(FUSED_GROUP, inputs, attrs, node.outputs[0].device)
            olds = [v for n in members for v in n.outputs]
            for old, new in zip(olds, outs):
                rw.alias(old, new)
        elif node.id not in grouped:
            rw.copy(node)
    return rw.graph, rw.outputs(outputs), rw.vmap
