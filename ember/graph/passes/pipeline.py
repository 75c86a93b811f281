"""The pass pipeline: which passes run (per call, process-wide, or from EMBER_PASSES) and in what order.

`optimize` never edits its input graph: each pass builds a new graph, and the result carries a map
from the old graph's surviving values to the new ones (placeholders included, so feeds can be
translated). Passes run in a fixed order whatever order they are named in: the simplifying
passes repeat until the graph stops changing, then fusion runs last (after `fold_activation` folds the
activation after an eval batch norm into its pass, `lower_pointwise` turns lerp/addcmul/addcdiv into
elementary ops it can merge, and CSE merges the coefficient arithmetic that lowering wrote once per
call; `horizontal` then groups the regions that run one program on different operands, such as every
parameter's update), then outputs that now alias an input or each other get a copy so callers still receive
fresh arrays.
"""

from __future__ import annotations

from ember import config
from ember.graph.ir import Graph, Value
from ember.graph.passes import (
    algebraic,
    constant_folding,
    cse,
    dce,
    fold_activation,
    fusion,
    horizontal,
    lower_pointwise,
)
from ember.op import OPS

PASSES = {  # name -> pass: (graph, outputs) -> (new graph, new outputs, old value -> new value)
    "dce": dce.run,
    "constant_folding": constant_folding.run,
    "algebraic": algebraic.run,
    "algebraic_unsafe": algebraic.run_unsafe,
    "cse": cse.run,
    "fusion": fusion.run,
    "lower_pointwise": lower_pointwise.run,  # runs with fusion, just before it
    "fold_activation": fold_activation.run,  # runs with fusion, before lower_pointwise
    "horizontal": horizontal.run,  # runs with fusion, just after it
}
DEFAULT_PASSES = ("dce", "constant_folding", "algebraic", "cse", "fusion")
_SIMPLIFY = ("dce", "constant_folding", "algebraic", "algebraic_unsafe", "cse")
_MAX_ROUNDS = 4
_default: tuple | None = None


class Optimized(tuple):
    """`(graph, outputs)` of an optimised program, with `value_map`: old value -> new value."""

    def __new__(cls, graph: Graph, outputs: list, value_map: dict) -> Optimized:
        self = super().__new__(cls, (graph, outputs))
        self.value_map = value_map
        return self

    @property
    def graph(self) -> Graph:
        return self[0]

    @property
    def outputs(self) -> list:
        return self[1]

    def map(self, value):
        """The new value standing for an old one (None when it was optimised away)."""
        return self.value_map.get(value)


def _parse(text: str) -> tuple:
    text = text.strip().lower()
    if text in ("", "none", "off", "0", "false"):
        return ()
    if text in ("default", "all", "on", "1", "true"):
        return DEFAULT_PASSES
    return resolve_passes([p.strip() for p in text.split(",") if p.strip()])


def resolve_passes(passes) -> tuple:
    """Normalise a passes setting: None (the default), True, False, a name, or names."""
    if passes is None:
        return get_default_passes()
    if passes is True:
        return DEFAULT_PASSES
    if passes is False:
        return ()
    if isinstance(passes, str):
        return _parse(passes)
    names = tuple(passes)
    for p in names:
        if p not in PASSES:
            raise ValueError(f"unknown graph pass {p!r}; known passes: {', '.join(PASSES)}")
    return names


def set_default_passes(passes) -> None:
    """Set the passes `optimize` and `ember.jit` use when given none (None: back to EMBER_PASSES/defaults)."""
    global _default
    _default = None if passes is None else resolve_passes(passes)


def get_default_passes() -> tuple:
    """The passes used when none are given: set_default_passes, else $EMBER_PASSES, else DEFAULT_PASSES."""
    if _default is not None:
        return _default
    env = config.PASSES.get()
    if env is not None:
        return _parse(env)
    return DEFAULT_PASSES


def _compose(total: dict, step: dict) -> dict:
    return {k: step[v] for k, v in total.items() if v in step}


def _signature(graph: Graph) -> tuple:
    return tuple(n.op_name for n in graph.nodes)


def _run(name, graph, outputs, total):
    graph, outputs, vmap = PASSES[name](graph, outputs)
    graph.check()
    return graph, outputs, _compose(total, vmap)


def _protect_outputs(graph: Graph, original: list, outputs: list) -> list:
    """Copy outputs that used to be fresh arrays but now alias an input, a constant or another output."""
    clone = OPS["clone"]
    seen: dict = {}
    result = []
    for old, new in zip(original, outputs):
        fresh_before = isinstance(old, Value) and old.node.kind == "op" and not old.node.op.is_view
        if fresh_before and isinstance(new, Value):
            aliased = new.node.kind != "op" or bool(new.node.op.is_view)
            shared = new in seen and seen[new] is not old
            if aliased or shared:
                new = graph.add_op(clone, [new], {}, new.device)
        seen.setdefault(new, old)
        result.append(new)
    return result


def optimize(graph: Graph, outputs, passes=None) -> Optimized:
    """Run the selected passes on (graph, outputs); returns (new_graph, new_outputs) with `.value_map`."""
    names = set(resolve_passes(passes))
    original = list(outputs)
    total = {v: v for n in graph.nodes for v in n.outputs}
    outs = list(original)
    simplify = [p for p in _SIMPLIFY if p in names]
    for _ in range(_MAX_ROUNDS if simplify else 0):
        before = _signature(graph)
        for name in simplify:
            graph, outs, total = _run(name, graph, outs, total)
        if _signature(graph) == before:
            break
    if "fusion" in names:
        # an eval batch norm's activation into its pass; lerp/addcmul/addcdiv as elementary ops, so an
        # optimizer's update fuses into few kernels
        graph, outs, total = _run("fold_activation", graph, outs, total)
        graph, outs, total = _run("lower_pointwise", graph, outs, total)
        if "cse" in names:  # lowering repeats the shared scalar work of each lerp/addcmul (1 - beta, its checks)
            graph, outs, total = _run("cse", graph, outs, total)
        graph, outs, total = _run("fusion", graph, outs, total)
        graph, outs, total = _run("horizontal", graph, outs, total)
    if names:
        outs = _protect_outputs(graph, original, outs)
        graph.check()
    return Optimized(graph, outs, total)
