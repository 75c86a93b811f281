"""Pruning (dead-code elimination): keep only the nodes the outputs need, plus nodes with side effects."""

from __future__ import annotations

from ember.graph.ir import Graph
from ember.graph.passes.rewrite import Rewriter, is_stateful


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` without the nodes neither `outputs` nor a stateful op depends on."""
    roots = list(outputs) + [n for n in graph.nodes if is_stateful(n)]
    keep = {n.id for n in graph.needed_for(roots)}
    rw = Rewriter(graph)
    for node in graph.nodes:
        if node.id in keep:
            rw.copy(node)
    return rw.graph, rw.outputs(outputs), rw.vmap
