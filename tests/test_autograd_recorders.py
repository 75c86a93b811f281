"""The dispatch fast paths (unary_path, binary_path), which build an op's autograd node inline, make the very node that
the general Node(op, attrs, inputs, outputs) makes: the same edges, input shapes and dtypes, saved inputs with their versions,
saved outputs, view version and output links, for views, ops that save inputs or outputs, ops that read only
what the inputs needing a gradient read, Python-number operands on either side, and inputs that are views or
non-leaves."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.autograd.engine import Node
from ember.dispatch import binary_path, unary_path
from ember.op import OPS
from ember.tensor import Tensor


def _fields(node: Node, out: Tensor) -> dict:
    def saved(entries):
        return None if entries is None else {i: (id(x), v) for i, (x, v) in entries.items()}

    def out_saved(entries):
        return None if entries is None else {i: (id(d), id(c), v, dev) for i, (d, c, v, dev) in entries.items()}

    # edges and in_meta: sequences either way (the fast paths make tuples, Node.__init__ lists)
    return {"op": node.op, "attrs": node.attrs, "edges": tuple(node.edges), "in_meta": tuple(node.in_meta),
            "saved": saved(node._saved), "out_saved": out_saved(node._out_saved), "view_version": node.view_version,
            "freed": node.freed, "retained": node.retained, "out": (out._requires_grad, out._grad_fn is node,
                                                                     out._output_nr)}


def _inputs():
    """(name, tensor) inputs that require grad: a leaf, a non-leaf, a view of a leaf written in place."""
    leaf = em.randn(3, 4, requires_grad=True)
    nonleaf = leaf * 2.0
    base = em.randn(6, 4, requires_grad=True).clone()
    view = base[1:4]
    base.mul_(3.0)  # a write after the view was taken: its history is rebuilt (current_grad_fn)
    return [("leaf", leaf), ("nonleaf", nonleaf), ("view", view)]


def _output(op, arrays, attrs, like):
    out = Tensor._make(op.kernel(np, *arrays, **attrs), like._device)
    if op.is_view:
        from ember.autograd.views import link_view

        link_view(op, out, (like,), attrs)
    return out


UNARY = [("exp", {}), ("relu", {}), ("tanh", {}), ("sigmoid", {}), ("sum", {"dim": (1,), "keepdim": False}),
         ("reshape", {"shape": (-1,)}), ("permute", {"dims": (1, 0)}), ("log_softmax", {"dim": 1}),
         ("getitem", {"index": (slice(0, 2),)})]


@pytest.mark.parametrize("name,attrs", UNARY, ids=[n for n, _ in UNARY])
@pytest.mark.parametrize("which", ["leaf", "nonleaf", "view"])
def test_one_operand_makes_the_general_node(name, attrs, which):
    op = OPS[name]
    x = dict(_inputs())[which]
    out_a = _output(op, (x._data,), attrs, x)
    a = Node(op, attrs, (x,), (out_a,))
    out_b = unary_path(op)(x, **attrs)
    b = out_b._grad_fn
    fa, fb = _fields(a, out_a), _fields(b, out_b)
    fa["out_saved"] = fb["out_saved"] = None if fa["out_saved"] is None else len(fa["out_saved"])  # distinct outputs
    assert fa == fb
    assert b.seq > a.seq


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "matmul", "atan2", "relu_backward"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("operands", ["both", "first", "second", "scalar_first", "scalar_second", "nonleaf_view"])
def test_two_operands_make_the_general_node(name, operands):
    op = OPS[name]
    inputs = dict(_inputs())
    leaf, nonleaf, view = inputs["leaf"], inputs["nonleaf"], inputs["view"]
    other = em.rand(3, 4) + 0.5
    if name == "matmul":
        other = em.rand(4, 3) + 0.5
    a, b = {"both": (leaf, other.requires_grad_()), "first": (leaf, other), "second": (other, leaf),
            "scalar_first": (1.5, leaf), "scalar_second": (leaf, 2.0), "nonleaf_view": (nonleaf, view)}[operands]
    if name in ("matmul", "relu_backward") and (operands.startswith("scalar") or operands == "nonleaf_view"):
        pytest.skip("these ops take no Python number, and matmul's operands here do not chain")
    arrays = tuple(t._data if isinstance(t, Tensor) else t for t in (a, b))
    like = a if isinstance(a, Tensor) else b
    out_a = _output(op, arrays, {}, like)
    node_a = Node(op, {}, (a, b), (out_a,))
    out_b = binary_path(op)(a, b)
    node_b = out_b._grad_fn
    fa, fb = _fields(node_a, out_a), _fields(node_b, out_b)
    fa["out_saved"] = fb["out_saved"] = None if fa["out_saved"] is None else len(fa["out_saved"])
    assert fa == fb


def test_fast_path_gradients_match_torch_through_views_and_in_place_writes():
    """Gradients through ops recorded by the fast paths, with a view written in place between them."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((4, 5))
    results = []
    for lib in (em, torch):
        t = lib.tensor(x, requires_grad=True)
        y = t * 2.0 - 1.0  # saves no value that the write below changes
        v = y[1:3]
        v.mul_(0.5)  # through a view of a non-leaf: y's history is rewritten
        z = (y.relu() + y.exp() * 0.1 + 1.0 / (t.abs() + 1.0)).reshape(-1).sum()
        z.backward()
        results.append(t.grad.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
