"""ember.v1 placement: ops under tf.device run there; sessions run such graphs across devices."""

import contextlib

import numpy as np
import pytest

import ember as em
import ember.v1 as tf
from ember.graph.executor import Plan
from ember.graph.placement import partition
from ember.graph.placement_exec import PlacedPlan

XS = np.random.RandomState(0).randn(6, 4).astype(np.float32)
YS = np.random.RandomState(1).randn(6, 2).astype(np.float32)


def _model(placed: bool, batch, scope=tf.device):
    """A two-layer regression model; with `placed`, the first layer on cpu:1 and the loss on cpu:0."""
    g = tf.Graph()
    on = (lambda d: scope(d)) if placed else (lambda d: contextlib.nullcontext())
    with g.as_default():
        x = tf.placeholder(tf.float32, [batch, 4], name="x")
        y = tf.placeholder(tf.float32, [batch, 2], name="y")
        with on("/cpu:1"):
            w1 = tf.Variable(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), name="w1")
            h = tf.nn.relu(tf.matmul(x, w1) + 0.1)
        with on("/cpu:0"):
            w2 = tf.Variable(np.linspace(1, -1, 16, dtype=np.float32).reshape(8, 2), name="w2")
            loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y))
        grads = tf.gradients(loss, [w1, w2])
        train = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
        init = tf.global_variables_initializer()
    return g, {"x": x, "y": y, "h": h, "loss": loss, "grads": grads, "train": train, "init": init, "w1": w1,
               "w2": w2}


def _run(placed: bool, batch, scope=tf.device):
    g, m = _model(placed, batch, scope)
    feed = {m["x"]: XS, m["y"]: YS}
    with tf.Session(graph=g) as sess:
        sess.run(m["init"])
        out = {"h": sess.run(m["h"], feed), "loss": sess.run(m["loss"], feed), "grads": sess.run(m["grads"], feed)}
        losses = [sess.run([m["train"], m["loss"]], feed)[1] for _ in range(3)]
        out["after"] = losses
        out["w1"], out["w2"] = sess.run([m["w1"], m["w2"]])
        kinds = {type(c.plan) for c in sess._plans.values()}
    return m, out, kinds


@pytest.mark.parametrize("batch", [6, None])  # None: the session specialises shapes before running
def test_placed_graph_fetches_the_same_values_and_gradients(batch):
    m, placed, kinds = _run(True, batch)
    _, single, single_kinds = _run(False, batch)
    assert m["h"].device == em.device("cpu:1") and m["loss"].device == em.device("cpu")
    assert PlacedPlan in kinds and single_kinds == {Plan}
    np.testing.assert_allclose(placed["h"], single["h"], rtol=1e-6)
    assert placed["loss"] == pytest.approx(single["loss"], rel=1e-6)
    for a, b in zip(placed["grads"], single["grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(placed["after"], single["after"], rtol=1e-5)
    np.testing.assert_allclose(placed["w1"], single["w1"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(placed["w2"], single["w2"], rtol=1e-5, atol=1e-7)


def test_ember_device_scopes_place_v1_ops_too():
    m, placed, kinds = _run(True, 6, scope=lambda d: em.device(d.strip("/")))
    _, single, _ = _run(False, 6)
    assert m["h"].device == em.device("cpu:1") and PlacedPlan in kinds
    assert placed["loss"] == pytest.approx(single["loss"], rel=1e-6)


def test_gradient_ops_follow_their_forward_ops_across_the_boundary(graph):
    x = tf.placeholder(tf.float32, [3], name="x")
    with tf.device("/cpu:1"):
        y = tf.exp(x) * 2.0
    with tf.device("/cpu:0"):
        z = tf.reduce_sum(y * y)
    (gx,) = tf.gradients(z, [x])
    assert gx.device == em.device("cpu")
    types = [op.type for op in graph.get_operations()]
    assert types.count("_Send") == types.count("_Recv") >= 2  # forward and backward transfers
    with tf.Session(graph=graph) as sess:
        xv = np.array([0.0, 0.5, 1.0], np.float32)
        np.testing.assert_allclose(sess.run(gx, {x: xv}), 8 * np.exp(2 * xv), rtol=1e-6)


def test_control_dependencies_across_devices_become_signal_wait_pairs(graph):
    with tf.device("/cpu:1"):
        a = tf.Variable(np.ones(2, np.float32), name="a")
    b = tf.Variable(np.zeros(2, np.float32), name="b")
    init = tf.global_variables_initializer()  # a no_op waiting for assigns on both devices
    parts = partition(graph, [], [init.node])
    ops = {dev: [n.op_name for n in part.graph.nodes] for dev, part in parts.items()}
    assert set(ops) == {em.device("cpu"), em.device("cpu:1")}
    assert sum(o.count("send_control") for o in ops.values()) == sum(o.count("recv_control") for o in ops.values()) == 1
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        va, vb = sess.run([a, b])
    np.testing.assert_array_equal(va, [1, 1])
    np.testing.assert_array_equal(vb, [0, 0])


def test_mixed_devices_outside_a_scope_are_still_an_error(graph):
    with tf.device("/cpu:1"):
        a = tf.constant([1.0, 2.0])
    b = tf.constant([3.0, 4.0])
    with pytest.raises(em.DeviceMismatchError, match="cpu:1 and cpu|cpu and cpu:1"):
        tf.add(a, b)


def test_a_placed_session_runs_from_several_threads_at_once(graph):
    import threading

    x = tf.placeholder(tf.float32, [3], name="x")
    with tf.device("/cpu:1"):
        y = tf.exp(x)
    with tf.device("/cpu:0"):
        z = y * 2.0
    with tf.device("/cpu:1"):
        out = tf.reduce_sum(z + 1.0)
    results, errors = {}, []
    sess = tf.Session(graph=graph)  # one session, one compiled plan, four threads running it

    def run(i):
        try:
            for _ in range(20):
                results[i] = sess.run(out, {x: np.full(3, i / 10, np.float32)})
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(sess._plans) == 1 and isinstance(next(iter(sess._plans.values())).plan, PlacedPlan)
    for i in range(4):
        assert results[i] == pytest.approx(3 * (2 * np.exp(i / 10) + 1), rel=1e-6)
