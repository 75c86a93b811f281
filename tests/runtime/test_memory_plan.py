"""Memory planning: buffers shared only by values never alive together, in-place reuse where safe,
identical results with planning on or off, in step order and under the parallel engine."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember as em
from ember.graph import Graph
from ember.graph.executor import Plan
from ember.runtime import set_memory_planning
from ember.runtime.allocator import pool
from ember.runtime.memory_check import validate

from ._graphs import build_random, conv_step, mlp_step, plan_of, sym


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype and x.shape == y.shape


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 50), min_size=3, max_size=120), st.lists(st.integers(0, 40), min_size=1, max_size=3))
def test_random_graphs_plan_validly_and_run_identically(choices, picks):
    _, feeds, _, plan = build_random(choices, picks)
    validate(plan.memory_plan("sequential"))
    validate(plan.memory_plan("parallel"))
    plain = plan.run(feeds, memory=False, parallel=False)
    _same(plain, plan.run(feeds, memory=True, parallel=False))
    _same(plain, plan.run(feeds, memory=True, parallel=True))
    _same(plain, plan.run(feeds, memory=True, parallel=False))  # the arena again, reused
    feeds2 = {k: v + 1.0 for k, v in feeds.items()}
    _same(plan.run(feeds2, memory=False, parallel=False), plan.run(feeds2, memory=True, parallel=False))


def test_mlp_training_step_plan_is_valid_and_at_most_half_the_unplanned_total():
    step, x, y, _ = mlp_step()
    step(x, y)
    plan = plan_of(step)
    mem = validate(plan.memory_plan())
    validate(plan.memory_plan("parallel"))
    assert mem.peak_bytes <= mem.unplanned_bytes / 2
    assert mem.live_peak_bytes <= mem.peak_bytes
    assert mem.n_buffers < mem.n_planned
    text = str(mem)
    assert "planned peak" in text and "buffer" in text and "relu" in text
    # the ReLUs write over the linear results, the where()s of their gradients over the matmuls
    assert mem.n_inplace >= 4


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_training_with_planning_on_and_off_is_identical(momentum):
    results = []
    for memory in (False, True):
        set_memory_planning(memory)
        try:
            step, x, y, model = mlp_step(sizes=(20, 16, 8, 3), batch=12, momentum=momentum)
            losses = [step(x, y).item() for _ in range(4)]
            results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
        finally:
            set_memory_planning(True)
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)


def _chain_plan():
    g = Graph()
    x = sym(g, (8, 8), name="x")
    h = (x @ x).exp()  # the matmul result dies at exp: exp writes over it
    h = h.tanh()  # in place again
    h2 = h.sin() + h  # h is still read by the add: sin must not overwrite it; the add may
    out = h2 * 2.0  # the graph output: never planned
    return g, x, Plan(g, [out._data])


def test_in_place_reuse_happens_exactly_where_it_is_safe():
    g, x, plan = _chain_plan()
    mem = validate(plan.memory_plan())
    names = [plan.steps[i].name for i, _, _ in mem.inplace]
    assert names == ["exp", "tanh", "add"]  # not sin (its input lives on), not mul (the output)
    feed = {x._data: np.random.default_rng(0).standard_normal((8, 8))}
    _same(plan.run(feed, memory=False), plan.run(feed, memory=True))


def test_no_in_place_over_inputs_views_or_outputs():
    g = Graph()
    x = sym(g, (4, 4), name="x")
    w = em.ones(4, 4)
    a = x.exp()  # over a placeholder: never
    b = (w + 0).T  # a view of an intermediate...
    c = (w * 2).exp() + b  # ...keeps that intermediate alive until here
    d = a.tanh()  # a dies here: allowed
    out = c + d
    plan = Plan(g, [out._data, a._data])  # ...but a is an output, so it is not planned at all
    mem = validate(plan.memory_plan())
    overwritten = {plan.steps[i].name for i, _, _ in mem.inplace}
    assert "exp" not in {plan.steps[i].name for i, src, _ in mem.inplace if src == plan.slot_of[x._data]}
    assert plan.slot_of[a._data] not in mem.assign
    assert "tanh" not in overwritten  # its input is an output
    feed = {x._data: np.arange(16.0).reshape(4, 4) / 16}
    _same(plan.run(feed, memory=False), plan.run(feed, memory=True))


def test_arena_is_allocated_once_and_reused_across_runs():
    g, x, plan = _chain_plan()
    feed = {x._data: np.ones((8, 8))}
    plan.run(feed, memory=True)
    misses = pool.stats()["num_cache_misses"]
    allocs = pool.stats()["num_allocs"]
    for _ in range(5):
        plan.run(feed, memory=True)
    assert pool.stats()["num_cache_misses"] == misses
    assert pool.stats()["num_allocs"] == allocs  # the arena's blocks were taken once


def test_graph_memory_plan_helpers_and_modes():
    g, x, plan = _chain_plan()
    assert em.memory.memory_plan(plan) is plan.memory_plan()
    with pytest.raises(ValueError, match="mode"):
        plan.memory_plan("sideways")
    text = plan.memory_plan().table()
    assert text.splitlines()[0].split()[0] == "buffer"


def test_validator_catches_a_broken_plan():
    g, x, plan = _chain_plan()
    mem = plan.memory_plan()
    a, b = mem.buffers[0], mem.buffers[-1]
    if a is b:
        pytest.skip("a single buffer")
    # move a value that is alive at the same time as one in buffer a into buffer a
    victim = next(s for s in b.values)
    mem.assign[victim] = a.id
    b.values.remove(victim)
    a.values.append(victim)
    with pytest.raises(AssertionError, match="invalid memory plan"):
        validate(mem)


def test_unknown_dimensions_are_left_to_run_time():
    g = Graph()
    x = sym(g, (None, 4), name="x")  # batch size unknown until fed
    y = ((x * 2).tanh() + 1).sum(1)
    plan = Plan(g, [y._data])
    mem = validate(plan.memory_plan())
    assert mem.n_planned == 0 and mem.n_unknown >= 2
    for rows in (3, 7):
        feed = {x._data: np.ones((rows, 4))}
        _same(plan.run(feed, memory=False), plan.run(feed, memory=True))


def test_the_arena_holds_only_values_written_into_it():
    # Conv, batch norm's backward and copying reshapes allocate their own results: buffers planned for them would
    # sit unused in the arena (a ResNet-20 step's arena was twice what its out= steps used). Batch norm writes its
    # output (not its statistics) into its buffer.
    from ember.runtime.memory import writes_into_buffer

    step, _, _ = conv_step()
    x, y = em.randn(4, 3, 8, 8), em.randint(0, 5, (4,))
    step(x, y)
    plan = plan_of(step)
    mem = validate(plan.memory_plan())
    placed = {plan.steps[mem.infos[s].producer].name for s in mem.assign}
    assert mem.assign and all(writes_into_buffer(plan.steps[mem.infos[s].producer], s) for s in mem.assign)
    assert not placed & {"conv2d", "batch_norm_backward", "conv_transpose2d"}
    norms = [k for k, st in enumerate(plan.steps) if st.name == "batch_norm"]
    assert norms and all(plan.steps[k].out_slots[0] in mem.assign for k in norms)
    assert not any(s in mem.assign for k in norms for s in plan.steps[k].out_slots[1:])
    assert mem.kernel_bytes > 0 and mem.n_kernel_allocated > 0
    assert "allocated by kernels" in mem.summary()
    arena = plan._take_arena("sequential")
    used = [a for a in arena.outs if a is not None]
    assert arena.nbytes == mem.peak_bytes == max(mem.buffers[mem.assign[s]].offset + mem.buffers[mem.assign[s]].nbytes
                                                  for s in mem.assign)
    assert len(used) == len(mem.assign)


def test_conv_net_training_is_identical_with_planning():
    """Several steps with what a user changes between them (the input batch rewritten in place, the learning
    rate): losses, parameters and learning rates equal with planning on and off, bit for bit."""
    results = []
    for memory in (False, True):
        set_memory_planning(memory)
        try:
            jitted, model, opt = conv_step(momentum=0.9, pool=True)
            rng = np.random.default_rng(1)
            x, y = em.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32)), em.randint(0, 5, (4,))
            losses, lrs = [], []
            for k in range(4):
                losses.append(jitted(x, y).item())
                x.copy_(em.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32)))  # the next batch, in place
                opt.param_groups[0]["lr"] = 0.05 / (k + 2)
                lrs.append(opt.param_groups[0]["lr"])
            if memory:
                validate(plan_of(jitted).memory_plan())
            results.append((losses, lrs, [p.detach().numpy().copy() for p in model.parameters()]))
        finally:
            set_memory_planning(True)
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    assert len(set(results[0][0])) == 4  # the batches and rates did change the steps
    for a, b in zip(results[0][2], results[1][2]):
        np.testing.assert_array_equal(a, b)
