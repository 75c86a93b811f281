"""Horizontal fusion: like fused regions (every parameter's update) run as one fused_group call with the values of
one call per region, bit for bit; members keep the graph's order; layouts the single call cannot take (a
non-contiguous operand, differing in-place writes, NumPy's renderer) run member by member, with the same values."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from passes_util import run, run_optimized, sym, values

import ember as em
from ember.graph import Graph, codegen
from ember.graph.passes import horizontal

F = em.nn.functional


def _model():
    em.manual_seed(3)
    return em.nn.Sequential(em.nn.Linear(5, 12), em.nn.ReLU(), em.nn.Linear(12, 7), em.nn.ReLU(), em.nn.Linear(7, 3))


@contextlib.contextmanager
def _grouping(on: bool):
    """Horizontal fusion on (groups from two members) or off, for the jit traces made inside."""
    saved = horizontal.MIN_MEMBERS
    horizontal.MIN_MEMBERS = 2 if on else 10**9
    try:
        yield
    finally:
        horizontal.MIN_MEMBERS = saved


def _jitted_step(model, opt):
    @em.jit
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _kernels(step, x, y) -> list:
    """The kernels one call of the step runs."""
    with em.profiler.profile() as prof:
        step(x, y)
    return [e.name for e in prof.events if e.cat != "range"]


def _train(grouping: bool, opt_name: str):
    with _grouping(grouping):
        model = _model()
        opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd" else \
            em.optim.Adam(model.parameters(), lr=0.01)
        step = _jitted_step(model, opt)
        em.manual_seed(0)
        losses = []
        for i in range(8):
            opt.param_groups[0]["lr"] *= 0.7  # the user changes the learning rate between steps
            if i == 5:
                with em.no_grad():  # and writes a parameter in place (the group writes into it too)
                    model[2].weight.mul_(0.5)
            x, y = em.randn(6 if i != 4 else 4, 5), em.randint(0, 3, (6 if i != 4 else 4,))
            losses.append(step(x, y).item())
        kernels = _kernels(step, x, y)
        state = [v.numpy().copy() for s in opt.state.values() for v in s.values() if isinstance(v, em.Tensor)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()], state, kernels


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_grouped_updates_equal_one_call_per_parameter_bit_for_bit(opt_name):
    la, pa, sa, ka = _train(True, opt_name)
    lb, pb, sb, kb = _train(False, opt_name)
    assert "fused_group" in ka and "fused_group" not in kb
    assert len(ka) < len(kb)
    assert la == lb
    for a, b in zip(pa + sa, pb + sb):
        np.testing.assert_array_equal(a, b)


def _update(x, scale):
    return (x * scale + 1.0) * 0.5


def test_members_group_only_before_every_reader_of_the_group():
    g = Graph()
    a, b, c = (sym(g, (4, 3)) for _ in range(3))
    w = sym(g, (3, 2))
    s = sym(g, (), np.float32)
    first = _update(a, s)
    second = _update(b, s)
    read = first @ w  # reads the first member's result before the third member
    third = _update(c, s)
    outs = values(first, second, third, read)
    rng = np.random.default_rng(0)
    feeds = {v: rng.standard_normal(v.shape).astype(np.float32) for v in values(a, b, c, w, s)}
    want = run(g, outs, feeds)
    got, opt = run_optimized(g, outs, feeds)
    groups = [n for n in opt.nodes if n.op_name == "fused_group"]
    assert [n.attrs["members"] for n in groups] == [2]  # the first two; the third comes after a reader of the first
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(expected, actual)


def _group_case():
    g = Graph()
    xs = [sym(g, shape) for shape in ((4, 3), (5, 2), (2, 7))]
    s = sym(g, (), np.float32)
    outs = values(*[_update(x, s) for x in xs])
    opt_graph = run_optimized(g, outs, {x._data: np.ones(x.shape, np.float32) for x in xs} | {s._data: np.float32(2)})[1]
    node = next(n for n in opt_graph.nodes if n.op_name == "fused_group")
    return node.attrs["region"], node.attrs["members"]


def _member_arrays(rng, transposed_first=False):
    a = rng.standard_normal((3, 4)).astype(np.float32).T if transposed_first else rng.standard_normal((4, 3)).astype(np.float32)
    return [a, np.float32(0.25), rng.standard_normal((5, 2)).astype(np.float32), np.float32(0.25),
            rng.standard_normal((2, 7)).astype(np.float32), np.float32(0.25)]


def _reference(region, members, arrays):
    n_in = len(region.inputs)
    return [o for m in range(members) for o in region.evaluate(np, [np.asarray(a) for a in arrays[m * n_in:(m + 1) * n_in]])]


@pytest.mark.parametrize("case", ["contiguous", "non_contiguous", "numpy_renderer", "mixed_in_place"])
def test_every_layout_gives_the_values_of_the_members_alone(case, monkeypatch):
    from ember.graph.codegen import numba_cpu

    calls = []
    single_call = numba_cpu.run_group
    monkeypatch.setattr(numba_cpu, "run_group", lambda *a: calls.append(single_call(*a)) or calls[-1])
    region, members = _group_case()
    assert members == 3 and len(region.inputs) == 2
    calls.clear()
    rng = np.random.default_rng(1)
    arrays = _member_arrays(rng, transposed_first=case == "non_contiguous")
    want = _reference(region, members, arrays)
    targets = None
    if case == "mixed_in_place":  # the first member writes into its input, the others into fresh arrays
        arrays = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in arrays]
        targets = {0: arrays[0]}
    try:
        if case == "numpy_renderer":
            codegen.set_backend("numpy")
        got = codegen.run_group(region, members, arrays, targets)
    finally:
        codegen.set_backend(None)
    assert len(got) == len(want)
    for w, h in zip(want, got):
        np.testing.assert_array_equal(w, h)
    if targets:
        assert got[0] is arrays[0]
    # one compiled call where every member is contiguous with the same in-place writes, else member by member
    assert [c is not None for c in calls] == ([True] if case == "contiguous" else [] if case == "numpy_renderer" else [False])


def test_regions_numpy_computes_faster_are_not_grouped():
    # Numba's tanh is a scalar libm call, NumPy's a vectorised ufunc: such regions keep their own calls.
    g = Graph()
    xs = [sym(g, (64, 32)) for _ in range(3)]
    outs = values(*[(x * 2.0).tanh() for x in xs] + [x * 3.0 + 1.0 for x in xs])
    feeds = {x._data: np.random.default_rng(i).standard_normal((64, 32)).astype(np.float32) for i, x in enumerate(xs)}
    want = run(g, outs, feeds)
    got, opt = run_optimized(g, outs, feeds)
    groups = [n for n in opt.nodes if n.op_name == "fused_group"]
    assert [len(n.attrs["region"].instrs) for n in groups] == [2]  # the x * 2 + 1 regions only
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(expected, actual)


def _bn_train(grouping: bool):
    with _grouping(grouping):
        em.manual_seed(5)
        model = em.nn.Sequential(em.nn.Conv2d(3, 8, 3, padding=1), em.nn.BatchNorm2d(8), em.nn.ReLU(),
                                 em.nn.Conv2d(8, 8, 3, padding=1), em.nn.BatchNorm2d(8, momentum=0.3), em.nn.ReLU(),
                                 em.nn.Flatten(), em.nn.Linear(8 * 6 * 6, 4))
        opt = em.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        step = _jitted_step(model, opt)
        em.manual_seed(1)
        kernels = None
        for i in range(7):
            model.train(i != 3)  # an eval-mode step: running statistics are read, not updated
            x, y = em.randn(5, 3, 6, 6), em.randint(0, 4, (5,))
            if i == 5:
                kernels = _kernels(step, x, y)
            else:
                step(x, y)
        return [t.detach().numpy().copy() for t in list(model.parameters()) + list(model.buffers())], kernels


def test_batch_norm_running_statistics_grouped_equal_one_call_per_layer():
    (grouped, kg), (alone, ka) = _bn_train(True), _bn_train(False)
    assert "fused_group" in kg and "fused_group" not in ka
    for a, b in zip(grouped, alone):
        np.testing.assert_array_equal(a, b)


def test_a_repeated_call_reuses_its_arguments_and_follows_every_change():
    """ember.jit runs a group with the same parameter and output arrays every step, but new gradients and new single
    values: the next call rebuilds only what changed, and every change the caller makes shows in the results
    (new input arrays, values written in place, new single values, new outputs, a layout it cannot take)."""
    from ember.graph.codegen import numba_cpu

    pytest.importorskip("numba")
    region, members = _group_case()
    rng = np.random.default_rng(2)
    arrays = _member_arrays(rng)
    targets = {p: np.empty(a.shape, np.float32) for p, a in enumerate(arrays[0::2])}

    def check(arrays, targets, reused):
        before = region.compiled.get(numba_cpu._LAST_GROUP_CALL)
        got = codegen.run_group(region, members, arrays, targets)
        for p, (w, h) in enumerate(zip(_reference(region, members, arrays), got)):
            np.testing.assert_array_equal(w, h)
            assert h is targets[p]
        assert (region.compiled.get(numba_cpu._LAST_GROUP_CALL) is before) == reused

    check(arrays, targets, reused=False)
    check(arrays, targets, reused=True)
    arrays[2] = rng.standard_normal((5, 2)).astype(np.float32)  # a new gradient array
    arrays[3] = np.float32(-3.0)  # a new learning rate
    check(arrays, targets, reused=True)
    arrays[4] *= 2.0  # written in place
    check(arrays, targets, reused=True)
    check(arrays, {p: np.empty_like(t) for p, t in targets.items()}, reused=False)  # new outputs: prepared again
    targets = region.compiled[numba_cpu._LAST_GROUP_CALL].outs
    targets = dict(enumerate(targets))
    arrays[0] = rng.standard_normal((3, 4)).astype(np.float32).T  # not contiguous: member by member
    check(arrays, targets, reused=True)
    arrays[1] = np.full((1,), 0.5, np.float32)  # a single value of another shape: prepared again
    arrays[0] = np.ascontiguousarray(arrays[0])
    check(arrays, targets, reused=False)
