"""tf.cond, tf.case and tf.while_loop: values, gradients, state, nesting, passes and placement.

The reference numbers were computed by TensorFlow (tf.compat.v1) running the same graphs on the same
data (np.random.RandomState(0)); TF returns the gather gradient of the RNN as IndexedSlices, given
here densely.
"""

import numpy as np
import pytest

import ember as em
import ember.v1 as tf
from ember.graph.control_flow import IfOp, WhileOp
from ember.graph.executor import Plan
from ember.graph.passes import optimize

ATOL = 2e-5


def _data():
    rng = np.random.RandomState(0)
    xv = rng.randn(4, 3).astype(np.float32)
    wv = rng.randn(3, 3).astype(np.float32) * 0.5
    uv = rng.randn(3, 3).astype(np.float32) * 0.3
    sv = rng.randn(5, 2, 3).astype(np.float32)
    return xv, wv, uv, sv


def test_cond_values_and_gradients_of_captured_variables(graph, sess):
    xv, wv, _, _ = _data()
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    W = tf.Variable(wv, name="W")
    b = tf.Variable(np.zeros(3, np.float32), name="b")
    y = tf.cond(p, lambda: tf.matmul(x, W), lambda: tf.nn.relu(x) * 2.0 + b)
    loss = tf.reduce_mean(tf.square(y))
    grads = tf.gradients(loss, [W, b, x])
    sess.run(tf.global_variables_initializer())
    lt, gwt, gbt, gxt = sess.run([loss] + grads, {x: xv, p: True})
    np.testing.assert_allclose(lt, 1.05333, atol=ATOL)
    np.testing.assert_allclose(gwt, [[0.71834, 0.6892, 0.25072], [0.37593, 0.59436, 0.37174],
                                     [0.07402, -0.43753, -0.83722]], atol=ATOL)
    np.testing.assert_array_equal(gbt, [0, 0, 0])  # b is only read by the branch not taken
    np.testing.assert_allclose(gxt[0], [0.02315, 0.03869, 0.21533], atol=ATOL)
    lf, gwf, gbf, gxf = sess.run([loss] + grads, {x: xv, p: False})
    np.testing.assert_allclose(lf, 5.31541, atol=ATOL)
    np.testing.assert_array_equal(gwf, np.zeros((3, 3)))
    np.testing.assert_allclose(gbf, [1.78854, 0.80392, 0.811], atol=ATOL)
    np.testing.assert_allclose(gxf[1], [1.49393, 1.24504, 0.0], atol=ATOL)


def test_only_the_taken_branch_runs(graph, sess):
    p = tf.placeholder(tf.bool, [])
    c1, c2 = tf.Variable(0, name="c1"), tf.Variable(0, name="c2")
    sess.run(tf.global_variables_initializer())
    upd = tf.cond(p, lambda: tf.assign_add(c1, 1), lambda: tf.assign_add(c2, 10))
    for pv in (True, True, False):
        sess.run(upd, {p: pv})
    assert sess.run([c1, c2]) == [2, 10]
    assert upd.op.type == "If"  # a branch with effects makes a stateful If (never pruned or merged)
    assert tf.cond(p, lambda: tf.constant(1.0), lambda: tf.constant(2.0)).op.type == "StatelessIf"


def test_random_draws_inside_a_branch_keep_their_gradient(graph, sess):
    x = tf.placeholder(tf.float32, [4, 3])
    p = tf.placeholder(tf.bool, [])
    d = tf.cond(p, lambda: tf.nn.dropout(x, keep_prob=0.5), lambda: x)
    (gd,) = tf.gradients(tf.reduce_sum(d), [x])
    dv, gv = sess.run([d, gd], {x: np.ones((4, 3), np.float32), p: True})
    np.testing.assert_array_equal(dv, gv)  # the mask the forward pass drew, not a new one


def test_while_loop_rnn_gradients_with_an_unknown_batch(graph, sess):
    _, wv, uv, sv = _data()
    seq = tf.placeholder(tf.float32, [5, None, 3], name="seq")
    W, U = tf.Variable(wv, name="W"), tf.Variable(uv, name="U")
    b = tf.Variable(np.zeros(3, np.float32), name="b")

    def step(t, h):
        return t + 1, tf.tanh(tf.matmul(tf.gather(seq, t), W) + tf.matmul(h, U) + b)

    _, h = tf.while_loop(lambda t, h: t < 5, step, [tf.constant(0), tf.zeros_like(seq[0])])
    assert h.get_shape().as_list() == [None, 3]
    loss = tf.reduce_sum(h * h)
    grads = tf.gradients(loss, [W, U, b, seq])
    sess.run(tf.global_variables_initializer())
    lv, gw, gu, gb, gs = sess.run([loss] + grads, {seq: sv})
    np.testing.assert_allclose(lv, 1.03864, atol=ATOL)
    np.testing.assert_allclose(gw, [[-0.03121, 0.47008, -0.13378], [-0.0472, 0.63797, -0.36777],
                                    [0.22361, 0.57824, -0.41831]], atol=ATOL)
    np.testing.assert_allclose(gu, [[0.21265, 0.01692, -0.3515], [0.06406, -0.38569, 0.20969],
                                    [-0.38901, 0.29862, 0.75065]], atol=ATOL)
    np.testing.assert_allclose(gb, [-0.61442, 0.06701, 1.11016], atol=ATOL)
    np.testing.assert_allclose(gs[0], [[-0.00339, 0.00504, 0.00232], [-0.00157, 0.00139, 0.00443]], atol=ATOL)
    np.testing.assert_allclose(gs[4], [[0.08621, 0.51639, -0.82405], [0.01021, -0.22666, -0.67135]], atol=ATOL)
    _, h2 = tf.while_loop(lambda t, h: t < 5, lambda t, h: list(step(t, h)), [tf.constant(0), tf.zeros_like(seq[0])],
                          maximum_iterations=2)
    np.testing.assert_allclose(sess.run(h2, {seq: sv}), [[0.74342, 0.84865, 0.76711], [-0.71457, -0.40588, 0.94203]],
                               atol=ATOL)


def test_shape_invariants_let_a_loop_variable_grow(graph, sess):
    i0, m0 = tf.constant(0), tf.ones([1, 2])
    _, m = tf.while_loop(lambda i, m: i < 3, lambda i, m: (i + 1, tf.concat([m, m * 2.0], 0)), [i0, m0],
                         shape_invariants=[i0.get_shape(), tf.TensorShape([None, 2])])
    assert m.get_shape().as_list() == [None, 2]
    np.testing.assert_array_equal(sess.run(m)[:, 0], [1, 2, 2, 4, 2, 4, 4, 8])
    with pytest.raises(ValueError, match=r"Input tensor 'ones_1:0' enters the loop with shape \(2,\), but has "
                                         r"shape \(4,\) after one iteration.*shape_invariants"):
        tf.while_loop(lambda v: tf.reduce_sum(v) < 100, lambda v: tf.concat([v, v], 0), [tf.ones([2])])


def test_nesting_and_structures(graph, sess):
    xv = _data()[0][:2]
    x = tf.placeholder(tf.float32, [None, 3])
    p = tf.placeholder(tf.bool, [])

    def body(i, acc):
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: acc + tf.cast(i, tf.float32), lambda: acc * 2.0)

    _, acc = tf.while_loop(lambda i, a: i < 6, body, [tf.constant(0), tf.constant(1.0)])
    assert sess.run(acc) == 24.0
    z = tf.cond(p, lambda: tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [0, tf.ones_like(x)])[1],
                lambda: x)
    (gz,) = tf.gradients(tf.reduce_sum(z), [x])
    zt, gt = sess.run([z, gz], {x: xv, p: True})
    np.testing.assert_allclose(zt[1], [11.25287, 6.51362, -0.93337], atol=1e-4)
    np.testing.assert_allclose(gt[1], [15.06481, 10.46332, 2.86522], atol=1e-4)
    np.testing.assert_array_equal(sess.run(gz, {x: xv, p: False}), np.ones((2, 3)))
    a, bb = tf.cond(p, lambda: (1.0, x[0]), lambda: (2.0, x[1]))
    av, bv = sess.run([a, bb], {x: xv, p: False})
    assert av == 2.0 and np.allclose(bv, xv[1])
    r1 = tf.while_loop(lambda i: i < 10, lambda i: i + 3, [tf.constant(0)])
    r2 = tf.while_loop(lambda i: i < 10, lambda i: (i + 3,), (tf.constant(0),))
    assert isinstance(r1, tf.Tensor) and sess.run([r1, r2]) == [12, 12]
    d = tf.while_loop(lambda s: s["n"] < 3, lambda s: {"n": s["n"] + 1, "v": s["v"] * 2.0},
                      {"n": tf.constant(0), "v": tf.constant(1.5)})
    assert sess.run(d) == {"n": 3, "v": 12.0}


def test_case(graph, sess):
    k = tf.placeholder(tf.int32, [])
    r = tf.case([(tf.equal(k, 0), lambda: tf.constant(10.0)), (tf.equal(k, 1), lambda: tf.constant(20.0))],
                default=lambda: tf.constant(-1.0))
    assert [sess.run(r, {k: v}) for v in (0, 1, 5)] == [10.0, 20.0, -1.0]


def test_variables_made_in_a_loop_body_belong_to_the_outer_graph(graph, sess):
    def body(i, h):
        with tf.variable_scope("cell", reuse=tf.AUTO_REUSE):
            w = tf.get_variable("w", [3, 3], initializer=tf.constant_initializer(0.1))
        return i + 1, tf.matmul(h, w) + 1.0

    _, h = tf.while_loop(lambda i, h: i < 2, body, [0, tf.zeros([1, 3])])
    (w,) = [v for v in tf.global_variables() if v.name.startswith("cell")]
    assert w.name == "cell/w:0" and w.graph is graph
    sess.run(tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(h), [[1.3, 1.3, 1.3]], atol=1e-6)
    np.testing.assert_allclose(sess.run(tf.gradients(tf.reduce_sum(h), [w])[0]), np.ones((3, 3)), atol=1e-6)
    with pytest.raises(ValueError, match="from inside a control-flow construct.*use a lambda"):
        tf.cond(tf.constant(True), lambda: tf.Variable(tf.zeros([2])) * 1.0, lambda: tf.zeros([2]))


def test_control_dependencies_on_outer_ops_are_lifted(graph, sess):
    v = tf.Variable(0.0)
    inc = tf.assign_add(v, 1.0)

    def branch():
        with tf.control_dependencies([inc]):
            return tf.identity(v) * 1.0

    y = tf.cond(tf.constant(True), branch, lambda: tf.constant(0.0))
    sess.run(v.initializer)
    assert sess.run(y) == 1.0 and inc.op in y.op.control_inputs


def test_errors(graph):
    x = tf.placeholder(tf.float32, [3])
    p = tf.placeholder(tf.bool, [])
    with pytest.raises(TypeError, match="pred must not be a Python bool"):
        tf.cond(True, lambda: x, lambda: x)
    with pytest.raises(ValueError, match="same number, type, and overall structure"):
        tf.cond(p, lambda: (x, x), lambda: x)
    with pytest.raises(TypeError, match="branches return float32 and int32"):
        tf.cond(p, lambda: x, lambda: tf.constant([1, 2, 3]))
    with pytest.raises(TypeError, match="condition must return a bool scalar"):
        tf.while_loop(lambda v: v, lambda v: v, [x])


def test_second_order_gradients_through_control_flow_raise(graph):
    x = tf.placeholder(tf.float32, [3])
    y = tf.cond(tf.constant(True), lambda: x * x * x, lambda: x)
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    with pytest.raises(NotImplementedError, match="gradient of a gradient through tf.cond"):
        tf.gradients(tf.reduce_sum(g), [x])


def test_a_loop_records_its_iterations_only_when_a_gradient_reads_them(graph, sess):
    x = tf.placeholder(tf.float32, [3])
    _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.sin(v)), [0, x])
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    xv = np.array([0.1, 0.2, 0.3], np.float32)
    np.testing.assert_allclose(sess.run(g, {x: xv}), np.cos(xv) * np.cos(np.sin(xv)) * np.cos(np.sin(np.sin(xv))),
                               rtol=1e-5)
    forward = Plan(graph, [y._data])
    backward = Plan(graph, [g._data])
    (fw,) = [s for s in forward.steps if isinstance(s.node.op, WhileOp)]
    bw = [s for s in backward.steps if isinstance(s.node.op, WhileOp)]
    assert fw.attrs["record"] is False and bw[0].attrs["record"] is True


def test_graph_passes_keep_control_flow_whole(graph, sess):
    x = tf.placeholder(tf.float32, [3])
    p = tf.placeholder(tf.bool, [])
    c = tf.constant([1.0, 2.0, 3.0])
    y = tf.cond(p, lambda: tf.exp(x) * 2.0 + 1.0, lambda: x * (c * 2.0))
    folded = tf.cond(tf.constant(True), lambda: c * 3.0, lambda: c)
    _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0 + x), [0, tf.zeros([3])])
    out = y + folded + acc
    (gx,) = tf.gradients(tf.reduce_sum(out), [x])
    v = tf.Variable(0.0)
    tf.cond(p, lambda: tf.assign_add(v, 1.0), lambda: tf.identity(v))
    sess.run(v.initializer)
    feeds = {x: np.array([0.1, 0.2, 0.3], np.float32), p: True}
    want = sess.run([out, gx], feeds)
    opt = optimize(graph, [out._data, gx._data])
    ops = [n.op for n in opt.graph.nodes if n.kind == "op"]
    assert sum(isinstance(o, IfOp) and not o.stateful for o in ops) == 2  # the constant-predicate cond is folded
    assert sum(isinstance(o, IfOp) and o.stateful for o in ops) == 1  # a cond with effects is never pruned
    plan = Plan(opt.graph, opt.outputs)
    got = plan.run({opt.map(x._data): feeds[x], opt.map(p._data): np.array(True)})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_control_flow_across_devices(graph):
    x = tf.placeholder(tf.float32, [3])
    p = tf.placeholder(tf.bool, [])
    with tf.device("/cpu:1"):
        w = tf.Variable([1.0, 2.0, 3.0], name="w")

    def true_fn():
        with tf.device("/cpu:1"):
            h = x * w
        return h + 1.0

    y = tf.cond(p, true_fn, lambda: x - w)
    with tf.device("/cpu:1"):
        z = tf.cond(p, lambda: x * 2.0, lambda: x)

    def body(i, a):
        with tf.device("/cpu:1"):
            a = a * w
        return i + 1, a

    _, acc = tf.while_loop(lambda i, a: i < 2, body, [0, x])
    with tf.device("/cpu:0"):
        total = tf.reduce_sum(y) + tf.reduce_sum(z) + tf.reduce_sum(acc)
    gx, gw = tf.gradients(total, [x, w])
    assert (y.device, z.device, gw.device) == (em.device("cpu"), em.device("cpu:1"), em.device("cpu:1"))
    with tf.Session(graph=graph) as sess:
        sess.run(w.initializer)
        ones = np.ones(3, np.float32)
        got = sess.run([y, z, acc, gx, gw], {x: ones, p: True})
        for a, b in zip(got, [[2, 3, 4], [2, 2, 2], [1, 4, 9], [4, 8, 14], [3, 5, 7]]):
            np.testing.assert_array_equal(a, b)
        got = sess.run([y, gx, gw], {x: ones, p: False})
        for a, b in zip(got, [[0, -1, -2], [3, 6, 11], [1, 3, 5]]):
            np.testing.assert_array_equal(a, b)
