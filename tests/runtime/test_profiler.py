"""The profiler (eager ops and graph steps, table, Chrome trace) and the MXNet example on the engine."""

import json
import threading

import numpy as np

import ember as em
from ember import dispatch
from ember.graph import Graph
from ember.graph.executor import Plan
from ember.op import OPS, Op, register
from ember.ops._rules import spec
from ember.runtime import set_num_interop_threads

from ._graphs import sym


def test_eager_ops_are_recorded_and_the_hook_is_removed_afterwards():
    a, b = em.ones(3, 4), em.ones(4, 2)
    assert dispatch.eager_now()
    with em.profiler.profile() as prof:
        c = (a @ b).relu()
        d = c + 1.0
        d.sum()
    assert dispatch.eager_now()
    names = [e.name for e in prof.events]
    assert names == ["matmul", "relu", "add", "sum"]
    mm = prof.events[0]
    assert mm.shapes == ((3, 4), (4, 2)) and mm.device == "cpu" and mm.cat == "eager"
    assert mm.dur_ns >= 0 and mm.tid == threading.get_native_id()
    np.testing.assert_array_equal(d.numpy(), np.full((3, 2), 5.0))


def test_graph_steps_are_recorded_and_summarised():
    g = Graph()
    x = sym(g, (8, 8), name="x")
    y = (x @ x).tanh() + x
    plan = Plan(g, [y._data])
    feed = {x._data: np.eye(8)}
    with em.profiler.profile() as prof:
        for _ in range(3):
            plan.run(feed, parallel=False)
    assert [e.name for e in prof.events[:3]] == ["matmul", "tanh", "add"]
    assert all(e.cat == "graph" for e in prof.events)
    rows = {r[0]: r for r in prof.key_averages()}
    assert rows["matmul"][1] == 3 and abs(sum(r[4] for r in rows.values()) - 1.0) < 1e-9
    table = prof.table()
    assert table.splitlines()[0].split() == ["op", "calls", "total", "mean", "%"]
    assert "matmul" in table and "tanh" in table


def test_chrome_trace_is_valid_json_with_one_row_per_thread(tmp_path):
    with em.profiler.profile() as prof:
        with em.profiler.record_function("my_range"):
            (em.ones(5) * 2).exp()
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads(open(path).read())
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"mul", "exp", "my_range"}
    for e in spans:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e) and e["dur"] >= 0
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in events)
    mul = next(e for e in spans if e["name"] == "mul")
    assert mul["args"]["shapes"] == [[5], []]


# --- the MXNet example: A = ones * 2; C = A + 2; B = A + 1; D = B * C ---------------------------
def _mxnet_graph(add_op=None):
    g = Graph()
    ones = sym(g, (2, 2), name="ones")
    A = ones * 2
    if add_op is None:
        C, B = A + 2, A + 1
    else:
        C = dispatch.apply(add_op, A, 2.0)
        B = dispatch.apply(add_op, A, 1.0)
    D = B * C
    return g, ones, [A._data, B._data, C._data, D._data]


def test_mxnet_example_gives_12_through_the_engine():
    before = em.get_num_interop_threads()
    set_num_interop_threads(2)
    try:
        g, ones, outs = _mxnet_graph()
        plan = Plan(g, outs)
        A, B, C, D = plan.run({ones._data: np.ones((2, 2), np.float32)}, parallel=True)
        np.testing.assert_array_equal(D, np.full((2, 2), 12.0))
        assert (A == 2).all() and (B == 3).all() and (C == 4).all()

        @em.jit
        def program(o):
            a = o * 2
            c = a + 2
            b = a + 1
            return b * c

        em.runtime.set_parallel(True)
        try:
            np.testing.assert_array_equal(program(em.ones((2, 2))).numpy(), np.full((2, 2), 12.0))
        finally:
            em.runtime.set_parallel("auto")
    finally:
        set_num_interop_threads(before)


class _RendezvousAdd(Op):
    """a + b, but only once two of these kernels are running at the same moment (test-only)."""

    name = "test_rendezvous_add"
    barrier = None

    def infer(self, a, b):
        return spec(a.shape, a.dtype)

    def kernel(self, xp, a, b):
        type(self).barrier.wait()  # raises BrokenBarrierError if the other kernel never runs alongside
        return a + b


RENDEZVOUS = OPS.get(_RendezvousAdd.name) or register(_RendezvousAdd())


def test_mxnet_branches_b_and_c_run_concurrently():
    before = em.get_num_interop_threads()
    set_num_interop_threads(2)
    _RendezvousAdd.barrier = threading.Barrier(2, timeout=10)
    try:
        g, ones, outs = _mxnet_graph(RENDEZVOUS)
        plan = Plan(g, outs)
        with em.profiler.profile() as prof:
            *_, D = plan.run({ones._data: np.ones((2, 2), np.float32)}, parallel=True)
        np.testing.assert_array_equal(D, np.full((2, 2), 12.0))
        b, c = [e for e in prof.events if e.name == "test_rendezvous_add"]
        assert b.cat == c.cat == "engine"
        assert b.overlaps(c) and b.tid != c.tid
        mul = [e for e in prof.events if e.name == "mul"]
        assert mul[-1].start_ns >= max(b.end_ns, c.end_ns)  # D waited for both branches
    finally:
        set_num_interop_threads(before)
        _RendezvousAdd.barrier = None


def test_independent_branches_show_on_separate_trace_rows(tmp_path):
    before = em.get_num_interop_threads()
    set_num_interop_threads(2)
    _RendezvousAdd.barrier = threading.Barrier(2, timeout=10)
    try:
        g, ones, outs = _mxnet_graph(RENDEZVOUS)
        with em.profiler.profile() as prof:
            Plan(g, outs).run({ones._data: np.ones((2, 2), np.float32)}, parallel=True)
        trace = prof.chrome_trace()["traceEvents"]
        rows = {e["tid"] for e in trace if e["name"] == "test_rendezvous_add"}
        assert len(rows) == 2
        names = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
        assert any(n.startswith("ember-engine-") for n in names)
    finally:
        set_num_interop_threads(before)
        _RendezvousAdd.barrier = None


