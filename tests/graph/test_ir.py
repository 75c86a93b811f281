"""The graph IR: building, text dump, invariants, shape errors at build time, pruning, pictures."""

import numpy as np
import pytest

import ember as em
from ember.graph import Graph
from ember.graph.executor import Plan


def _sym(graph, shape, dtype=np.float32, name=None):
    v = graph.placeholder(shape, dtype, em.device("cpu"), name)
    return em.Tensor._make(v, em.device("cpu"))


def test_dump_shows_ops_shapes_and_devices():
    g = Graph()
    x = _sym(g, (None, 4), name="x")
    w = em.randn(4, 10)
    y = (x @ w).relu()
    text = g.dump()
    assert "%0 = placeholder('x') : float32[?, 4] @cpu" in text
    assert "%2 = matmul(%0, %1) : float32[?, 10] @cpu" in text
    assert "relu(%2) : float32[?, 10]" in text
    assert y.shape == (None, 10)
    g.check()


def test_indexing_keeps_unknown_dimensions_unknown():
    g = Graph()
    s = _sym(g, (5, None, 3))
    assert s[0].shape == (None, 3) and s[:, 1].shape == (5, 3) and s[:, 1:].shape == (5, None, 3)
    assert s[..., 0].shape == (5, None) and s[:, -1].shape == (5, 3) and s[1:3].shape == (2, None, 3)
    with pytest.raises(IndexError, match="getitem"):
        s[7]


def test_static_shape_mismatch_is_reported_where_the_node_is_built():
    g = Graph()
    x = _sym(g, (None, 784))
    w = _sym(g, (10, 10))
    with pytest.raises(ValueError, match=r"matmul.*\(\?, 784\).*\(10, 10\)"):
        x @ w
    assert len(g) == 2  # nothing was appended


def test_run_touches_only_the_needed_subgraph_and_names_unfed_placeholders():
    g = Graph()
    a = _sym(g, (3,), name="a")
    b = _sym(g, (3,), name="b")
    out_a = a * 2
    out_b = b + 1
    plan = Plan(g, [out_a._data])
    assert [n.op_name for n in plan.nodes] == ["placeholder", "mul"]
    (res,) = plan.run({a._data: np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(res, [0, 2, 4])
    with pytest.raises(ValueError, match="placeholder 'b'.*not fed"):
        Plan(g, [out_b._data]).run({})


def test_captured_tensors_are_read_at_every_run():
    g = Graph()
    x = _sym(g, (2,))
    w = em.ones(2)
    y = x * w
    plan = Plan(g, [y._data])
    feed = {x._data: np.ones(2, dtype=np.float32)}
    np.testing.assert_array_equal(plan.run(feed)[0], [1, 1])
    w.mul_(3)
    np.testing.assert_array_equal(plan.run(feed)[0], [3, 3])


def test_kernel_errors_at_run_time_name_the_op():
    g = Graph()
    i = _sym(g, (2,), np.int64)
    src = em.arange(3.0)
    y = src.index_select(0, i)
    with pytest.raises((IndexError, RuntimeError), match="index_select"):
        Plan(g, [y._data]).run({i._data: np.array([0, 7])})


def test_check_detects_broken_invariants():
    g = Graph()
    x = _sym(g, (2,))
    _ = x + 1
    g.nodes[0], g.nodes[1] = g.nodes[1], g.nodes[0]
    with pytest.raises(AssertionError):
        g.check()


def test_symbolic_gradients_match_eager():
    g = Graph()
    x = _sym(g, (5, 3)).requires_grad_()
    w = em.randn(3, 2, requires_grad=True)
    loss = (x @ w).tanh().sum()
    gx, gw = em.autograd.grad(loss, [x, w])
    xv = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    rx, rw = Plan(g, [gx._data, gw._data]).run({x._data: xv})
    xe = em.tensor(xv, requires_grad=True)
    w.grad = None
    (xe @ w).tanh().sum().backward()
    np.testing.assert_allclose(rx, xe.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(rw, w.grad.numpy(), rtol=1e-5)


def test_dot_marks_roles_and_render_falls_back_to_dot_text(tmp_path, monkeypatch):
    g = Graph()
    x = _sym(g, (None, 3), name="x")
    w = em.randn(3, 2, requires_grad=True)
    y = (x @ w).sum()
    dot = g.to_dot([y._data])
    assert "invhouse" in dot  # inputs
    assert "parameter" in dot  # captured tensors that require grad
    assert "peripheries=2" in dot  # outputs
    assert "matmul" in dot and "float32[?, 2]" in dot
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    out = g.render(str(tmp_path / "g.svg"), [y._data])
    assert out.endswith(".dot")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
