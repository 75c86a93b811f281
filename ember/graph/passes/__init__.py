"""Graph optimizer passes: pruning, CSE, constant folding, algebraic simplification, elementwise fusion.

`optimize(graph, outputs, passes=None)` returns `(new_graph, new_outputs)` (with `.value_map` from
old values to new ones); `passes` is None (the default set), False/[] (none), or pass names. Each
pass module has `run(graph, outputs) -> (graph, outputs, value_map)`.
"""

from ember.graph.passes.pipeline import (
    DEFAULT_PASSES,
    PASSES,
    Optimized,
    get_default_passes,
    optimize,
    resolve_passes,
    set_default_passes,
)

__all__ = [
    "optimize", "Optimized", "set_default_passes", "get_default_passes", "resolve_passes", "PASSES",
    "DEFAULT_PASSES",
]
