"""The fusion decision: which nodes become one fused_elementwise node, and that results are unchanged."""

import numpy as np
import pytest
from passes_util import assert_same, op_count, run, run_optimized, sym, values

import ember as em
from ember.graph import Graph
from ember.graph.codegen import FUSED
from ember.graph.passes import optimize

RNG = np.random.default_rng(1)
F = "fused_elementwise"


def _x(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_a_chain_becomes_one_fused_node():
    g = Graph()
    x = sym(g, (8, 5), name="x")
    y = ((x * 2 + 1).relu() - 0.5).abs().sqrt()
    opt = optimize(g, values(y), ["fusion"])
    assert [n.op_name for n in opt.graph.nodes] == ["placeholder", F]
    feeds = {x._data: _x((8, 5))}
    assert_same(run(g, values(y), feeds), run_optimized(g, values(y), feeds, ["fusion"])[0])


def test_a_tree_with_broadcast_inputs_becomes_one_node():
    g = Graph()
    a = sym(g, (4, 6), name="a")
    b = sym(g, (6,), name="b")
    c = sym(g, (4, 1), name="c")
    y = em.where(a > 0, a * b, c - b) * (a + c).tanh()
    opt = optimize(g, values(y), ["fusion"])
    assert op_count(opt.graph) == 1
    feeds = {a._data: _x((4, 6)), b._data: _x((6,)), c._data: _x((4, 1))}
    assert_same(run(g, values(y), feeds), run_optimized(g, values(y), feeds, ["fusion"])[0], rtol=1e-5)


def test_values_used_outside_the_region_become_extra_outputs():
    g = Graph()
    x = sym(g, (4, 4), name="x")
    w = sym(g, (4, 4), name="w")
    t = (x * 3).tanh()
    m = t @ w  # reads t: t is computed once and kept as an output of the fused node
    y = (t + 1) * 2
    outs = values(m, y)
    opt = optimize(g, outs, ["fusion"])
    fused = [n for n in opt.graph.nodes if n.op_name == F]
    assert len(fused) == 1 and len(fused[0].outputs) == 2
    assert op_count(opt.graph) == 2  # fused + matmul
    feeds = {x._data: _x((4, 4)), w._data: _x((4, 4))}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-5)


def test_fusion_never_creates_a_cycle_through_an_outside_node():
    g = Graph()
    x = sym(g, (4, 4), name="x")
    w = sym(g, (4, 4), name="w")
    t = x.exp()
    m = t @ w
    y = t * m  # exp -> matmul -> mul: exp and mul cannot share a kernel the matmul sits between
    z = y + 1
    opt = optimize(g, values(z), ["fusion"])
    opt.graph.check()
    feeds = {x._data: _x((4, 4)), w._data: _x((4, 4))}
    assert_same(run(g, values(z), feeds), run_optimized(g, values(z), feeds, ["fusion"])[0], rtol=1e-5)


def test_smaller_intermediates_are_not_recomputed_inside_a_bigger_region():
    g = Graph()
    x = sym(g, (64, 32), name="x")
    b = sym(g, (32,), name="b")
    bb = b.exp().sin()  # shape (32,): stays its own region, not recomputed 64 times
    y = (x + bb).relu() * 2
    opt = optimize(g, values(y), ["fusion"])
    fused = [n for n in opt.graph.nodes if n.op_name == F]
    assert [n.outputs[0].shape for n in fused] == [(32,), (64, 32)]


def test_a_trailing_reduction_joins_the_region():
    g = Graph()
    p = sym(g, (16, 8), name="p")
    t = sym(g, (16, 8), name="t")
    loss = ((p - t) ** 2).mean()
    rows = (p * t).sum(1, keepdim=True)
    outs = values(loss, rows)
    opt = optimize(g, outs, ["fusion"])
    assert op_count(opt.graph) == 2 and op_count(opt.graph, F) == 2
    feeds = {p._data: _x((16, 8)), t._data: _x((16, 8))}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-5, atol=1e-6)


def test_non_elementwise_and_stateful_ops_stay_out():
    g = Graph()
    x = sym(g, (4, 4), name="x")
    y = (x @ x).exp().softmax(1) * 2
    opt = optimize(g, values(y), ["fusion"])
    assert op_count(opt.graph, F) == 0  # exp and mul are separated by softmax: nothing to fuse


def test_fused_node_specs_and_error_on_differentiation():
    g = Graph()
    i = sym(g, (3, 1), np.int32, name="i")
    x = sym(g, (3, 4), name="x")
    y = (i * 2.5 + x).gt(0)
    z = y.float() * i
    outs = values(y, z)
    opt = optimize(g, outs, ["fusion"])
    assert [(v.shape, v.dtype) for v in opt.outputs] == [((3, 4), np.bool_), ((3, 4), np.float32)]
    node = next(n for n in opt.graph.nodes if n.op_name == F)
    with pytest.raises(RuntimeError, match="fusion runs after autodiff"):
        FUSED.vjp(None, None)
    assert "region" in node.attrs and "mul" in repr(node.attrs["region"])


def test_unknown_dimensions_are_checked_at_run_time():
    g = Graph()
    a = sym(g, (None, 4), name="a")
    b = sym(g, (None, 4), name="b")
    t = a.exp()  # an extra output: if a turns out to have 1 row, t has 1 row too
    y = (t + b) * 2
    outs = values(t, y)
    opt = optimize(g, outs, ["fusion"])
    assert op_count(opt.graph, F) == 1
    for rows_a, rows_b in ((5, 5), (1, 5), (3, 1)):
        feeds = {a._data: _x((rows_a, 4)), b._data: _x((rows_b, 4))}
        assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-6)


def test_outputs_never_alias_inputs_or_each_other_after_optimising():
    g = Graph()
    x = sym(g, (3,), name="x")
    outs = values(x * 1, x + 0, (x * 2).exp(), (x * 2).exp())
    opt = optimize(g, outs)
    feeds = {opt.map(x._data): np.ones(3, np.float32)}
    from ember.graph.executor import Plan

    res = Plan(opt.graph, opt.outputs).run(feeds)
    arrays = [feeds[opt.map(x._data)]] + res
    for i in range(len(arrays)):
        for j in range(i + 1, len(arrays)):
            assert not np.shares_memory(arrays[i], arrays[j])


def test_independent_zero_dim_chains_share_one_kernel():
    """Horizontal fusion: an optimizer's per-parameter 0-d work (step counts, bias corrections) is one kernel."""
    g = Graph()
    steps = [sym(g, (), name=f"s{k}") for k in range(5)]
    lone = sym(g, (), name="lone")
    outs = values(*[1 - 0.9 ** (s + 1) for s in steps], lone * 3)  # five chains and a lone op
    opt = optimize(g, outs, ["fusion"])
    fused = [n for n in opt.graph.nodes if n.op_name == F]
    assert len(fused) == 1 and len(fused[0].outputs) == 6 and op_count(opt.graph) == 1
    feeds = {s._data: np.float32(k + 0.5) for k, s in enumerate(steps)} | {lone._data: np.float32(2)}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0])


def test_zero_dim_chains_stay_apart_when_one_needs_the_other_through_an_outside_node():
    g = Graph()
    s = sym(g, (), name="s")
    w = sym(g, (3, 3), name="w")
    a = (s + 1) * 2
    m = (w * a).sum()  # an outside reduction between the two 0-d chains
    b = (m - 1).exp()
    outs = values(a, b)
    opt = optimize(g, outs, ["fusion"])
    opt.graph.check()
    assert sum(n.op_name == F for n in opt.graph.nodes) >= 2
    feeds = {s._data: np.float32(0.25), w._data: _x((3, 3)) * 0.1}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-5)


def test_whole_region_takes_every_op_with_its_zero_dim_work_and_the_inputs_in_the_order_given():
    """One region for a whole small program (an optimizer's update): its 0-d arithmetic computed in the loop,
    its inputs in the order asked for, its outputs in the order asked for; a program that cannot be one region
    is refused with the op named."""
    from ember.graph.codegen import run_region
    from ember.graph.passes.fusion import whole_region

    g = Graph()
    p, grad = sym(g, (6,), name="p"), sym(g, (6,), name="g")
    lr = sym(g, (), np.float64, name="lr")
    new_grad = grad * 0.5
    new_p = p - new_grad * (lr * 2)
    region, inputs = whole_region(g, values(new_p, new_grad), values(lr, grad, p))
    assert inputs == values(lr, grad, p)
    feeds = [np.float64(0.1), _x((6,)), _x((6,))]
    got = run_region(region, feeds)
    want = run(g, values(new_p, new_grad), dict(zip(values(lr, grad, p), feeds)))
    assert_same(got, want)
    with pytest.raises(ValueError, match="not among the inputs given"):
        whole_region(g, values(new_p), values(p, grad))
    h = Graph()
    x = sym(h, (3, 3))
    with pytest.raises(ValueError, match="matmul .* cannot be part of a fused elementwise kernel"):
        whole_region(h, values((x @ x) + 1), values(x))
