"""DCE, CSE, constant folding and algebraic simplification: node counts before/after, and equal values."""

import numpy as np
import pytest
from passes_util import assert_same, op_count, run, run_optimized, sym, values

import ember as em
from ember.graph import CONSTANT, Graph
from ember.graph.passes import constant_folding, cse, dce, optimize
from ember.op import Op

RNG = np.random.default_rng(0)


def _feed(x, shape=(3, 4), dtype=np.float32):
    return {x._data: RNG.standard_normal(shape).astype(dtype)}


# --- dce ------------------------------------------------------------------------------------------
def test_dce_keeps_only_what_outputs_need():
    g = Graph()
    x = sym(g, (3, 4), name="x")
    y = x.exp()
    _unused = (x * 3).tanh()
    out = y + 1
    assert op_count(g) == 4
    new, outs, _ = dce.run(g, values(out))
    new.check()
    assert op_count(new) == 2 and [n.op_name for n in new.nodes] == ["placeholder", "exp", "add"]
    feeds = _feed(x)
    assert_same(run(g, values(out), feeds), run_optimized(g, values(out), feeds, ["dce"])[0])


class _Assign(Op):
    """A stand-in for an op with side effects (ember.v1 assign, random draws)."""

    name = "test_assign"
    stateful = True

    def infer(self, x):
        return x

    def kernel(self, xp, x):
        return x


def test_dce_never_removes_stateful_ops():
    g = Graph()
    x = sym(g, (3,), name="x")
    src = (x * 2).exp()
    g.add_op(_Assign(), [src._data], {}, em.device("cpu"))  # nothing reads its result
    out = x + 1
    new, _, _ = dce.run(g, values(out))
    assert [n.op_name for n in new.nodes] == ["placeholder", "mul", "exp", "test_assign", "add"]


# --- cse ------------------------------------------------------------------------------------------
def test_cse_merges_repeated_computations():
    g = Graph()
    x = sym(g, (3, 4), name="x")
    a = (x * 2).tanh()
    b = (x * 2).tanh()
    out = a + b
    assert op_count(g) == 5
    new, _, _ = cse.run(g, values(out))
    assert op_count(new) == 3
    feeds = _feed(x)
    assert_same(run(g, values(out), feeds), run_optimized(g, values(out), feeds, ["cse", "dce"])[0])


def test_cse_compares_attributes_structurally_and_keeps_scalar_types_apart():
    g = Graph()
    x = sym(g, (4, 6), name="x")
    s1 = x[1:3, ::2]
    s2 = x[1:3, ::2]  # equal slices: one getitem
    s3 = x[1:3, 1::2]  # different slice: kept
    i1 = x * 2  # int scalar
    i2 = x * 2.0  # float scalar: promotes differently in general, so not merged
    z1 = x + 0.0
    z2 = x + (-0.0)  # -0.0 is a different constant
    outs = values(s1, s2, s3, i1, i2, z1, z2)
    new, new_outs, _ = cse.run(g, outs)
    assert op_count(new, "getitem") == 2
    assert op_count(new, "mul") == 2 and op_count(new, "add") == 2
    assert new_outs[0] is new_outs[1] and new_outs[0] is not new_outs[2]


def test_cse_merges_ops_with_array_attributes_and_equal_constants():
    g = Graph()
    x = sym(g, (3,), name="x")
    c1 = g.constant(np.array([1.0, 2.0, 3.0], np.float32), em.device("cpu"))
    c2 = g.constant(np.array([1.0, 2.0, 3.0], np.float32), em.device("cpu"))
    idx = em.Tensor._make(g.constant(np.array([0, 2]), em.device("cpu")), em.device("cpu"))
    cx1 = em.Tensor._make(c1, em.device("cpu"))
    cx2 = em.Tensor._make(c2, em.device("cpu"))
    out = (x * cx1 + x * cx2)[idx]
    new, _, _ = cse.run(g, values(out))
    assert sum(1 for n in new.nodes if n.kind == CONSTANT) == 2  # the two equal float constants are one
    assert op_count(new, "mul") == 1


def test_cse_never_merges_stateful_ops():
    g = Graph()
    x = sym(g, (3,), name="x")
    a = g.add_op(_Assign(), [x._data], {}, em.device("cpu"))
    b = g.add_op(_Assign(), [x._data], {}, em.device("cpu"))
    new, outs, _ = cse.run(g, [a, b])
    assert op_count(new, "test_assign") == 2 and outs[0] is not outs[1]


# --- constant folding -------------------------------------------------------------------------------
def test_constant_folding_evaluates_constant_subgraphs():
    g = Graph()
    x = sym(g, (3,), name="x")
    c = em.Tensor._make(g.constant(np.array([1.0, 4.0, 9.0], np.float32), em.device("cpu")), em.device("cpu"))
    k = (c.sqrt() * 2 + 1).exp()  # all constant
    out = x * k
    new, outs, _ = constant_folding.run(g, values(out))
    new, _, _ = dce.run(new, outs)
    assert op_count(new) == 1  # only the multiply by x is left
    feeds = _feed(x, (3,))
    assert_same(run(g, values(out), feeds), run_optimized(g, values(out), feeds, ["constant_folding", "dce"])[0])


def test_constant_folding_never_folds_captured_tensors():
    w = em.ones(3)
    g = Graph()
    x = sym(g, (3,), name="x")
    cw = em.Tensor._make(g.capture(w), em.device("cpu"))
    out = x * (cw * 2)  # w is captured: it may change between runs
    opt = optimize(g, values(out), ["constant_folding", "dce"])
    assert op_count(opt.graph) == 2
    feeds = {opt.map(x._data): np.ones(3, np.float32)}
    from ember.graph.executor import Plan

    plan = Plan(opt.graph, opt.outputs)
    np.testing.assert_array_equal(plan.run(feeds)[0], [2, 2, 2])
    w.mul_(5)
    np.testing.assert_array_equal(plan.run(feeds)[0], [10, 10, 10])


def test_constant_folding_folds_shape_only_ops_and_respects_the_size_cap(monkeypatch):
    g = Graph()
    x = sym(g, (4, 5), name="x")
    ones = em.ones_like(x)  # reads only x's shape
    out = x + ones * 3
    opt = optimize(g, values(out), ["constant_folding", "dce"])
    assert op_count(opt.graph) == 1
    monkeypatch.setattr(constant_folding, "MAX_FOLD_BYTES", 16)
    opt = optimize(g, values(out), ["constant_folding", "dce"])
    assert op_count(opt.graph) == 3  # 80-byte results stay computed at run time


def test_constant_folding_never_folds_stateful_ops():
    g = Graph()
    c = g.constant(np.ones(3, np.float32), em.device("cpu"))
    a = g.add_op(_Assign(), [c], {}, em.device("cpu"))
    new, _, _ = constant_folding.run(g, [a])
    assert op_count(new, "test_assign") == 1


def test_constant_folding_leaves_failing_ops_to_fail_at_run_time():
    g = Graph()
    c = em.Tensor._make(g.constant(np.array([1, 2], np.int64), em.device("cpu")), em.device("cpu"))
    out = c // 0  # integer division by zero raises when run
    new, _, _ = constant_folding.run(g, values(out))
    assert op_count(new, "floor_divide") == 1


# --- algebraic ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda x: x * 1, lambda x: 1 * x, lambda x: x * 1.0, lambda x: x + 0, lambda x: 0 + x, lambda x: x - 0,
    lambda x: x / 1, lambda x: x ** 1, lambda x: x.neg().neg(),
])
def test_algebraic_identities_remove_the_op(make):
    g = Graph()
    x = sym(g, (3, 4), name="x")
    y = make(x).tanh()
    opt = optimize(g, values(y), ["algebraic", "dce"])
    assert [n.op_name for n in opt.graph.nodes] == ["placeholder", "tanh"]
    feeds = _feed(x)
    assert_same(run(g, values(y), feeds), run_optimized(g, values(y), feeds, ["algebraic", "dce"])[0])


@pytest.mark.parametrize("make", [
    lambda x: x * 1.5,  # not an identity
    lambda x: x.int() * 1.0,  # int * float promotes: the spec changes
    lambda x: x + em.zeros(2, 3, 4),  # broadcasting changes the shape
    lambda x: x.bool() * 1,  # bool * int is int64
])
def test_algebraic_keeps_ops_whose_result_spec_differs(make):
    g = Graph()
    x = sym(g, (3, 4), name="x")
    y = make(x)
    before = op_count(g)
    opt = optimize(g, values(y), ["algebraic", "dce"])
    assert op_count(opt.graph) == before


def test_algebraic_multiplication_by_zero_is_kept_for_nan_semantics():
    g = Graph()
    x = sym(g, (3,), name="x")
    y = x * 0
    opt = optimize(g, values(y), ["algebraic", "dce"])
    assert op_count(opt.graph, "mul") == 1
    res, _ = run_optimized(g, values(y), {x._data: np.array([np.nan, 1, np.inf], np.float32)}, ["algebraic"])
    assert np.isnan(res[0][0]) and np.isnan(res[0][2])


def test_algebraic_permute_and_reshape_chains():
    g = Graph()
    x = sym(g, (2, 3, 4), name="x")
    back = x.permute(2, 0, 1).permute(1, 2, 0)  # identity
    two = x.permute(1, 0, 2).permute(0, 2, 1)  # one permute
    flat = x.reshape(6, 4).reshape(24).reshape(4, 6)  # one reshape
    same = x.reshape(2, 3, 4)  # no-op
    outs = values(back.exp(), two.exp(), flat.exp(), same.exp())
    opt = optimize(g, outs, ["algebraic", "dce"])
    assert op_count(opt.graph, "permute") == 1 and op_count(opt.graph, "reshape") == 1
    feeds = _feed(x, (2, 3, 4))
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["algebraic", "dce"])[0])


def test_algebraic_cast_chains():
    g = Graph()
    x = sym(g, (5,), name="x")
    up_down = x.double().float()  # float32 -> float64 -> float32 is exact: removed
    lossy = x.half().float()  # rounds to float16: kept
    i = sym(g, (5,), np.int32, name="i")
    via_int64 = i.long().double()  # int32 -> int64 -> float64 == int32 -> float64
    same = x.float()  # cast to its own dtype
    outs = values(up_down + 0.5, lossy + 0.5, via_int64 + 0.5, same + 0.5)
    opt = optimize(g, outs, ["algebraic", "dce"])
    assert op_count(opt.graph, "cast") == 3  # lossy pair (2) + one direct int32 -> float64
    feeds = {x._data: RNG.standard_normal(5).astype(np.float32), i._data: np.arange(5, dtype=np.int32) * 1000}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["algebraic", "dce"])[0])


def test_exp_log_rewrites_only_in_the_unsafe_pass():
    g = Graph()
    x = sym(g, (3,), name="x")
    outs = values(x.log().exp() + 1, x.exp().log() + 1)
    assert op_count(optimize(g, outs, ["algebraic", "dce"]).graph) == 6
    opt = optimize(g, outs, ["algebraic_unsafe", "dce"])
    assert op_count(opt.graph) == 2
    feeds = {x._data: np.array([0.5, 1.0, 2.0], np.float32)}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["algebraic_unsafe", "dce"])[0], rtol=1e-6)


def test_every_pass_keeps_the_graph_invariants():
    g = Graph()
    x = sym(g, (4, 4), name="x")
    y = ((x * 1).permute(1, 0).permute(1, 0) + 0).tanh()
    z = ((x * 1).permute(1, 0).permute(1, 0) + 0).tanh()
    outs = values(y + z, (y * z).sum(0))
    for p in ("dce", "cse", "constant_folding", "algebraic", "fusion"):
        opt = optimize(g, outs, [p])
        opt.graph.check()
    feeds = _feed(x, (4, 4))
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds)[0])
