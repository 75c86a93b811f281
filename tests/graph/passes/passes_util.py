"""Helpers for the pass tests: build graphs from placeholders, run them before and after optimising."""

from __future__ import annotations

import numpy as np

import ember as em
from ember.graph import Graph
from ember.graph.executor import Plan
from ember.graph.passes import optimize

CPU = em.device("cpu")


def sym(graph: Graph, shape, dtype=np.float32, name=None) -> em.Tensor:
    """A symbolic tensor fed through a placeholder of `graph`."""
    return em.Tensor._make(graph.placeholder(shape, dtype, CPU, name), CPU)


def values(*tensors) -> list:
    """The graph values behind symbolic tensors."""
    return [t._data for t in tensors]


def run(graph: Graph, outputs, feeds: dict) -> list:
    """Run (graph, outputs) with feeds keyed by placeholder value."""
    return Plan(graph, outputs).run(feeds)


def run_optimized(graph: Graph, outputs, feeds: dict, passes=None):
    """Optimise, run with the feeds translated, and return (results, optimised graph)."""
    opt = optimize(graph, outputs, passes)
    opt.graph.check()
    new_feeds = {opt.map(k): v for k, v in feeds.items() if opt.map(k) is not None}
    return Plan(opt.graph, opt.outputs).run(new_feeds), opt.graph


def op_count(graph: Graph, name: str | None = None) -> int:
    """Op nodes in the graph (of one op, when named)."""
    return sum(1 for n in graph.nodes if n.kind == "op" and (name is None or n.op.name == name))


def assert_same(expected: list, actual: list, rtol=1e-6, atol=1e-7) -> None:
    """Equal shapes, dtypes and values (NaNs in the same places)."""
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape and e.dtype == a.dtype, (e.shape, e.dtype, a.shape, a.dtype)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
