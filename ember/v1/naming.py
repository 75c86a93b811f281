"""TF1's op names: every node of an `ember.v1` graph is named, "scope/Type" by default or by `name=`.

`default_name(node)` is the name TF1 gives a node built without one (`MatMul`, `add`, `Const`,
...). `tf_op("MatMul")` decorates a public function: its `name=` argument (or the default) names
the tensor it returns, made unique in the graph; the nodes it builds on the way sit in a name scope
of that name, as TF1's composite functions put theirs (`moments/mean`, `dense/kernel`).
"""

from __future__ import annotations

import functools
import inspect

from ember.graph.tf_names import default_name, type_name  # noqa: F401 - ember.v1's names for them
from ember.v1.static_shapes import unknown_rank_error


def _unknown_rank_input(graph, args: list):
    """The first argument (or item of a list argument) that is a tensor of unknown rank, else None."""
    if not graph.unknown_rank:
        return None
    for a in args:
        for t in a if isinstance(a, (list, tuple)) else (a,):
            data = getattr(t, "_data", None)
            if getattr(data, "symbolic", False) is True and data in graph.unknown_rank:
                return t
    return None


def tf_op(default: str):
    """Decorator for a public ember.v1 function: its result is named `name` (or `default`) in the graph."""

    def deco(fn):
        params = list(inspect.signature(fn).parameters)
        pos = params.index("name") if "name" in params else None

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            from ember.v1.graph_api import Graph, get_default_graph

            name = kwargs.get("name")
            if name is None and pos is not None and len(args) > pos:
                name = args[pos]
            graph = get_default_graph()
            if not isinstance(graph, Graph):
                return fn(*args, **kwargs)
            final = graph.unique_name(graph.prefixed(str(name or default)))
            start = len(graph.nodes)
            with graph.absolute_scope(final):
                try:
                    out = fn(*args, **kwargs)
                except (ValueError, IndexError) as e:  # built on a stand-in shape: say the rank is unknown
                    unknown = _unknown_rank_input(graph, list(args) + list(kwargs.values()))
                    if unknown is None:
                        raise
                    raise unknown_rank_error(default, unknown) from e
            return graph.adopt(out, final, start)

        return wrapper

    return deco
