"""The dependency engine: read/write ordering on shared variables, concurrency, errors, thread count."""

import random
import threading
import time

import pytest

import ember as em
from ember.runtime.engine import Engine, EngineError


@pytest.fixture
def eng():
    e = Engine(4)
    yield e
    e.stop()


def test_read_after_write_sees_the_write(eng):
    box = {"a": 0}
    seen = []
    a = eng.new_var("a")

    def write():
        time.sleep(0.01)
        box["a"] = 1

    eng.push(write, writes=[a], name="write")
    eng.push(lambda: seen.append(box["a"]), reads=[a], name="read")
    eng.wait_for_all()
    assert seen == [1]


def test_write_after_read_waits_for_the_reader(eng):
    box = {"a": 0}
    seen = []
    a = eng.new_var("a")

    def read():
        time.sleep(0.01)
        seen.append(box["a"])

    eng.push(read, reads=[a], name="read")
    eng.push(lambda: box.__setitem__("a", 1), writes=[a], name="write")
    eng.wait_for_all()
    assert seen == [0] and box["a"] == 1


def test_write_after_write_keeps_push_order(eng):
    out = []
    a = eng.new_var()
    for i in range(20):
        def w(i=i):
            time.sleep(random.random() * 1e-3)
            out.append(i)

        eng.push(w, writes=[a])
    eng.wait_for_all()
    assert out == list(range(20))


def test_readers_of_one_variable_run_at_once(eng):
    a = eng.new_var()
    barrier = threading.Barrier(3, timeout=5)
    for _ in range(3):
        eng.push(barrier.wait, reads=[a])  # only passes if all three readers run together
    eng.wait_for_all()


def test_random_pushes_equal_a_sequential_run(eng):
    rng = random.Random(0)
    n_vars = 6
    vals = list(range(n_vars))
    ref = list(vals)
    vars_ = [eng.new_var(f"v{i}") for i in range(n_vars)]
    for k in range(300):
        reads = rng.sample(range(n_vars), rng.randint(0, 3))
        writes = rng.sample(range(n_vars), rng.randint(1, 2))
        c = rng.randint(1, 5)

        def op(reads=reads, writes=writes, c=c, k=k, box=vals):
            s = sum(box[r] for r in reads)
            if k % 7 == 0:
                time.sleep(1e-4)
            for w in writes:
                box[w] = (box[w] * 3 + s + c) % 1_000_003

        op(box=ref)  # the sequential reference, in push order
        eng.push(op, [vars_[r] for r in reads], [vars_[w] for w in writes], name=f"op{k}")
    eng.wait_for_all()
    assert vals == ref


def test_a_kernel_error_surfaces_at_the_next_sync_with_the_op_name(eng):
    a, b = eng.new_var("a"), eng.new_var("b")
    ran = []

    def bad():
        raise ValueError("boom")

    eng.push(bad, writes=[a], name="my_bad_op")
    eng.push(lambda: ran.append(1), reads=[a], writes=[b], name="downstream")
    with pytest.raises(EngineError, match="my_bad_op failed: ValueError: boom") as info:
        eng.wait_for_all()
    assert info.value.op_name == "my_bad_op" and isinstance(info.value.__cause__, ValueError)
    assert ran == []  # it read a value that was never computed, so it did not run
    with pytest.raises(EngineError, match="my_bad_op"):
        eng.wait_for_var(b)  # the error travelled on to what the skipped kernel writes
    eng.wait_for_all()  # reported once: the engine is clean again
    eng.push(lambda: ran.append(2), writes=[a])
    eng.wait_for_var(a)  # a successful write makes the variable valid again
    assert ran == [2]


def test_waiting_inside_a_kernel_is_refused(eng):
    a = eng.new_var()
    errors = []

    def inner():
        try:
            eng.wait_for_all()
        except RuntimeError as e:
            errors.append(str(e))

    eng.push(lambda: time.sleep(0.01), writes=[a])
    eng.push(inner)
    eng.wait_for_all()
    assert errors and "deadlock" in errors[0]


def test_set_num_interop_threads_sizes_the_engine():
    before = em.get_num_interop_threads()
    try:
        em.set_num_interop_threads(3)
        assert em.get_num_interop_threads() == 3
        eng = em.runtime.get_engine()
        out = []
        v = eng.new_var()
        eng.push(lambda: out.append(threading.current_thread().name), writes=[v])
        eng.wait_for_all()
        assert out[0].startswith("ember-engine-") and eng.n_threads == 3
        with pytest.raises(ValueError):
            em.set_num_interop_threads(0)
    finally:
        em.set_num_interop_threads(before)


def test_a_failing_step_of_a_parallel_graph_run_names_the_op():
    import numpy as np

    from ember.graph import Graph
    from ember.graph.executor import Plan

    from ._graphs import sym

    g = Graph()
    i = sym(g, (2,), np.int64, name="i")
    x = sym(g, (3,), name="x")
    left = em.arange(3.0).index_select(0, i) * 2  # fails for a bad index
    right = (x * 3).sin()  # an independent branch
    plan = Plan(g, [(left + right[:2])._data])
    feed = {i._data: np.array([0, 7]), x._data: np.ones(3)}
    with pytest.raises(RuntimeError, match="index_select"):
        plan.run(feed, parallel=True)
    feed[i._data] = np.array([0, 2])
    (out,) = plan.run(feed, parallel=True)  # the plan still works afterwards
    np.testing.assert_allclose(out, np.array([0.0, 4.0]) + np.sin(3.0))


@pytest.mark.parametrize("slow", ["engine", "sequential"])
def test_an_auto_plan_times_both_ways_and_keeps_the_faster(slow, monkeypatch):
    import time

    import numpy as np

    from ember.graph import Graph
    from ember.graph.executor import Plan

    from ._graphs import sym

    g = Graph()
    x = sym(g, (512, 512), name="x")
    plan = Plan(g, [((x @ x).sin() + (x * 2) @ x)._data])  # two independent branches with work
    monkeypatch.setattr(plan, "_parallel_helps", lambda: True)
    ways = []
    real = {"engine": plan._run_engine, "sequential": plan._run_sequential}

    def timed(way):
        def run(*args):
            ways.append(way)
            if way == slow:
                time.sleep(0.25)  # far above what a loaded CI machine adds to either way
            return real[way](*args)
        return run

    monkeypatch.setattr(plan, "_run_engine", timed("engine"))
    monkeypatch.setattr(plan, "_run_sequential", timed("sequential"))
    feed = {x._data: np.ones((512, 512))}
    for _ in range(11):
        plan.run(feed, parallel="auto")
    assert ways[:8] == ["sequential"] * 4 + ["engine"] * 4  # a block each, its first run not counted
    faster = "sequential" if slow == "engine" else "engine"
    assert ways[8:] == [faster] * 3
    # the arena of the way not chosen is given up: it would sit in memory unused
    assert set(plan._arenas) == {"parallel" if faster == "engine" else "sequential"}


def test_an_auto_plans_trial_does_not_count_each_ways_first_run(monkeypatch):
    # The first run of a way pays the switch (the other way's threads still polling, its arena's first touch), here
    # made the engine's only fast one: counted, it would pick the engine, which is slower in every later run.
    import time

    import numpy as np

    from ember.graph import Graph
    from ember.graph.executor import Plan

    from ._graphs import sym

    g = Graph()
    x = sym(g, (64, 64), name="x")
    plan = Plan(g, [((x @ x).sin() + (x * 2) @ x)._data])
    monkeypatch.setattr(plan, "_parallel_helps", lambda: True)
    ways = []
    real = {"engine": plan._run_engine, "sequential": plan._run_sequential}

    def timed(way, delay):
        def run(*args):
            if way == "engine" and "engine" in ways:
                time.sleep(delay)
            elif way == "sequential":
                time.sleep(delay)
            ways.append(way)
            return real[way](*args)
        return run

    monkeypatch.setattr(plan, "_run_engine", timed("engine", 0.3))
    monkeypatch.setattr(plan, "_run_sequential", timed("sequential", 0.1))
    feed = {x._data: np.ones((64, 64))}
    for _ in range(10):
        plan.run(feed, parallel="auto")
    assert ways[8:] == ["sequential"] * 2
