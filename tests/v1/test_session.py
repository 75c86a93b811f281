"""Session.run: fetch structures, feeds and their errors, variables and state ops, defaults, threads."""

import collections
import threading

import numpy as np
import pytest

import ember.v1 as tf
from ember.errors import ShapeError

# --- fetch structures -----------------------------------------------------------------------------------


def test_fetch_structures(graph, sess):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    a, b = x * 2.0, tf.reduce_sum(x)
    Pair = collections.namedtuple("Pair", "first second")
    op = tf.no_op()
    fetches = {"a": a, "nested": [b, (a, {"op": op, "b": b})], "pair": Pair(b, [a]),
               "ordered": collections.OrderedDict([("z", b), ("y", a)])}
    xv = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    out = sess.run(fetches, feed_dict={x: xv})
    assert set(out) == {"a", "nested", "pair", "ordered"}
    np.testing.assert_array_equal(out["a"], xv * 2)
    assert isinstance(out["nested"], list) and isinstance(out["nested"][1], tuple)
    assert out["nested"][0] == 10.0 and out["nested"][1][1] == {"op": None, "b": 10.0}
    assert isinstance(out["pair"], Pair) and out["pair"].first == 10.0
    np.testing.assert_array_equal(out["pair"].second[0], xv * 2)
    assert isinstance(out["ordered"], collections.OrderedDict) and list(out["ordered"]) == ["z", "y"]
    assert sess.run(op) is None
    assert sess.run([]) == [] and sess.run(()) == ()


def test_scalars_come_back_as_numpy_scalars_and_results_are_copies(graph, sess):
    w = tf.Variable([1.0, 2.0])
    c = tf.constant([5, 6])
    sess.run(w.initializer)
    total = sess.run(tf.reduce_sum(w))
    assert isinstance(total, np.float32) and total == 3.0
    got_w, got_c = sess.run([w, c])
    got_w[0] = 100.0
    got_c[0] = 100
    np.testing.assert_array_equal(sess.run(w), [1.0, 2.0])  # the caller cannot write into the storage
    np.testing.assert_array_equal(sess.run(c), [5, 6])


def test_fetch_and_feed_by_name(graph, sess):
    x = tf.placeholder(tf.float32, [2], name="inp")
    y = tf.identity(x * 3.0)
    graph.name_node(y._data.node, "out")
    np.testing.assert_array_equal(sess.run("out:0", {"inp:0": [1.0, 2.0]}), [3.0, 6.0])
    np.testing.assert_array_equal(sess.run(y, {"inp": [1.0, 1.0]}), [3.0, 3.0])
    assert graph.get_tensor_by_name("inp:0").shape == (2,)
    assert graph.get_operation_by_name("out").type == "Identity"


def test_feeding_an_intermediate_tensor(graph, sess):
    x = tf.placeholder(tf.float32, [None])
    h = x * 2.0
    y = h + 1.0
    np.testing.assert_array_equal(sess.run(y, {h: [10.0, 20.0]}), [11.0, 21.0])  # x need not be fed
    np.testing.assert_array_equal(sess.run(y, {x: [1.0]}), [3.0])


def test_feed_converts_to_the_placeholder_dtype(graph, sess):
    f = tf.placeholder(tf.float32, [None])
    i = tf.placeholder(tf.int64, [None])
    out_f, out_i = sess.run([f, i], {f: [1, 2], i: np.array([3, 4], np.int32)})
    assert out_f.dtype == np.float32 and out_i.dtype == np.int64
    assert sess.run(f, {f: np.array([0.5], np.float64)}).dtype == np.float32


def test_plans_are_cached_per_fetches_and_fed_shapes(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.reduce_sum(x, 1)
    for n in (2, 2, 5, 2):
        sess.run(y, {x: np.ones((n, 3), np.float32)})
    assert len(sess._plans) == 2
    sess.run([y, x], {x: np.ones((2, 3), np.float32)})
    assert len(sess._plans) == 3


# --- errors -----------------------------------------------------------------------------------------------
def test_unfed_placeholder_is_named(graph, sess):
    x = tf.placeholder(tf.float32, [None, 784], name="images")
    with pytest.raises(tf.errors.InvalidArgumentError, match="placeholder tensor 'images' with dtype float"):
        sess.run(x * 2.0)


def test_wrong_feed_shape_is_an_error_naming_both_shapes(graph, sess):
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    with pytest.raises(ValueError, match=r"shape \(3, 783\) for Tensor 'x:0', which has shape '\(\?, 784\)'"):
        sess.run(x, {x: np.zeros((3, 783))})
    with pytest.raises(ValueError, match=r"shape \(784,\)"):
        sess.run(x, {x: np.zeros(784)})
    s = tf.placeholder(tf.float32, [], name="scalar")
    with pytest.raises(ValueError, match="scalar"):
        sess.run(s, {s: [1.0]})


def test_fed_shapes_that_do_not_combine_name_the_op(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 3])
    z = tf.reduce_sum(x * y)
    with pytest.raises(ValueError, match=r"mul: shapes \(5, 3\) and \(6, 3\)"):
        sess.run(z, {x: np.ones((5, 3)), y: np.ones((6, 3))})
    assert sess.run(z, {x: np.ones((5, 3)), y: np.ones((5, 3))}) == 15.0


def test_a_feed_the_cast_would_change_is_an_error(graph, sess):
    i = tf.placeholder(tf.int32, [None], name="labels")
    with pytest.raises(TypeError, match="1.5 .*float64.*'labels:0' of dtype int32"):
        sess.run(i, {i: [1.5, 2.0]})
    b = tf.placeholder(tf.bool, [2], name="mask")
    with pytest.raises(TypeError, match="'mask:0'"):
        sess.run(b, {b: [2, 0]})
    with pytest.raises(ValueError, match="'labels:0'"):
        sess.run(i, {i: ["a"]})


def test_uninitialized_variable_is_a_failed_precondition(graph, sess):
    W = tf.Variable(tf.zeros([3, 2]), name="W")
    x = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value W"):
        sess.run(tf.matmul(x, W), {x: np.ones((1, 3))})
    with pytest.raises(RuntimeError, match="uninitialized value W"):
        sess.run(tf.assign_add(W, tf.ones([3, 2])))
    with pytest.raises(RuntimeError, match="uninitialized value W"):
        sess.run(W.read_value())
    report = tf.report_uninitialized_variables()
    assert sess.run(report).tolist() == [b"W"]  # evaluated when the graph runs, as in TF1
    sess.run(W.initializer)
    assert sess.run(report).tolist() == []


def test_static_shape_mismatch_raises_when_built(graph):
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([10, 10]))
    with pytest.raises(ShapeError, match=r"matmul.*\(\?, 784\).*\(10, 10\)"):
        tf.matmul(x, W)
    with pytest.raises(ValueError, match="assign.*shape"):
        tf.assign(W, tf.zeros([3]))


def test_bad_fetches_and_closed_sessions(graph):
    import ember as em

    sess = tf.Session()
    with pytest.raises(TypeError, match="invalid type"):
        sess.run(3)
    with pytest.raises(TypeError, match="concrete"):
        sess.run(em.ones(2))
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0)
    with pytest.raises(ValueError, match="cannot be interpreted as a Tensor.*is not an element of this graph"):
        sess.run(foreign)
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(tf.constant(1.0))


def test_values_of_different_graphs_cannot_be_combined(graph):
    a = tf.constant(1.0)
    with tf.Graph().as_default():
        b = tf.constant(2.0)
    with pytest.raises(ValueError, match="different graphs"):
        tf.add(a, b)


# --- variables and state ops -----------------------------------------------------------------------------
def test_variable_attributes_and_initializers(graph, sess):
    with tf.name_scope("layer"):
        W = tf.Variable(tf.ones([2, 3]), name="W")
    step = tf.Variable(0, trainable=False, name="step")
    assert W.name == "layer/W:0" and W.op.name == "layer/W" and W.shape == (2, 3) and W.dtype is tf.float32
    assert step.dtype is tf.int32 and step.shape == ()
    assert tf.global_variables() == [W, step] and tf.trainable_variables() == [W]
    assert W == W and W != step and len({W, step}) == 2  # identity comparison, as TF1 variables
    sess.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(W), np.ones((2, 3)))
    assert sess.run(step) == 0
    W.load(np.full((2, 3), 7.0))
    assert W.eval().sum() == 42.0
    with pytest.raises(ValueError, match="unknown dimensions"):
        tf.Variable(tf.placeholder(tf.float32, [None]))


def test_assign_ops_return_the_new_value(graph, sess):
    v = tf.Variable([1.0, 2.0])
    sess.run(tf.initialize_all_variables())
    np.testing.assert_array_equal(sess.run(tf.assign(v, [5.0, 6.0])), [5.0, 6.0])
    np.testing.assert_array_equal(sess.run(v.assign_add([1.0, 1.0])), [6.0, 7.0])
    np.testing.assert_array_equal(sess.run(tf.assign_sub(v, [2.0, 2.0])), [4.0, 5.0])
    inc = tf.assign_add(v, [1.0, 1.0])
    for _ in range(3):
        sess.run(inc)
    np.testing.assert_array_equal(sess.run(v), [7.0, 8.0])


def test_control_dependencies_and_group(graph, sess):
    counter = tf.Variable(0, name="counter")
    total = tf.Variable(0.0, name="total")
    x = tf.placeholder(tf.float32, [])
    sess.run(tf.global_variables_initializer())
    inc = tf.assign_add(counter, 1)
    with tf.control_dependencies([inc]):
        read_after = tf.identity(counter)  # reads the variable after the increment
        add = tf.assign_add(total, x)
    train = tf.group(add, tf.no_op())
    assert sess.run(read_after) == 1
    assert sess.run(train, {x: 2.5}) is None
    assert sess.run([counter, total]) == [2, 2.5]
    assert tf.Operation(read_after._data.node).control_inputs[0].type == "AssignAdd"


def test_default_session_eval_and_run(graph):
    x = tf.placeholder(tf.float32, [2])
    y = x + 1.0
    with pytest.raises(ValueError, match="No default session"):
        y.eval({x: [1.0, 2.0]})
    with tf.Session() as sess:
        assert tf.get_default_session() is sess
        np.testing.assert_array_equal(y.eval({x: [1.0, 2.0]}), [2.0, 3.0])
        tf.no_op().run()
    assert tf.get_default_session() is None and sess.closed
    inter = tf.InteractiveSession()
    try:
        np.testing.assert_array_equal(y.eval(feed_dict={x: [0.0, 0.0]}), [1.0, 1.0])
    finally:
        inter.close()
    assert tf.get_default_session() is None


def test_default_graph_stack():
    tf.reset_default_graph()
    base = tf.get_default_graph()
    g = tf.Graph()
    with g.as_default():
        assert tf.get_default_graph() is g
        c = tf.constant(1.0)
    assert tf.get_default_graph() is base and c._data.graph is g
    tf.reset_default_graph()
    assert tf.get_default_graph() is not base
    with g.as_default(), pytest.raises(AssertionError):
        tf.reset_default_graph()


def test_graph_dump_names_v1_nodes(graph):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    W = tf.Variable(tf.zeros([4, 2]), name="W")
    tf.matmul(x, W)
    text = str(graph)
    assert "placeholder('x')" in text and "variable('W')" in text and "matmul" in text
    assert "digraph" in graph.to_dot()


# --- threads ----------------------------------------------------------------------------------------------
def test_threads_run_overlapping_fetches_on_one_session(graph):
    rng = np.random.default_rng(0)
    wv, bv = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4])
    W, b = tf.Variable(wv), tf.Variable(bv)
    logits = tf.matmul(x, W) + b
    probs = tf.nn.softmax(logits)
    loss = tf.reduce_mean(-tf.reduce_sum(tf.log(probs), 1))
    grad_w, = tf.gradients(loss, [W])
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    fetch_sets = [[logits], [probs, loss], {"l": loss, "g": grad_w}, [logits, grad_w, probs]]
    errors, barrier = [], threading.Barrier(6)

    def reference(xv):
        z = xv @ wv + bv
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        ls = -np.log(p).sum(1).mean()
        g = xv.T @ (p * 3 - 1) / len(xv)  # d/dz of -sum(log softmax) is 3p - 1 per row (3 classes)
        return {"logits": z, "probs": p, "loss": ls, "grad": g}

    def worker(seed):
        try:
            r = np.random.default_rng(seed)
            barrier.wait()
            for it in range(40):
                xv = r.standard_normal((int(r.integers(1, 6)), 4)).astype(np.float32)
                k = (seed + it) % len(fetch_sets)
                out = sess.run(fetch_sets[k], {x: xv})
                ref = reference(xv)
                if k == 0:
                    np.testing.assert_allclose(out[0], ref["logits"], rtol=1e-5, atol=1e-5)
                elif k == 1:
                    np.testing.assert_allclose(out[0], ref["probs"], rtol=1e-5, atol=1e-6)
                    np.testing.assert_allclose(out[1], ref["loss"], rtol=1e-5)
                elif k == 2:
                    np.testing.assert_allclose(out["l"], ref["loss"], rtol=1e-5)
                    np.testing.assert_allclose(out["g"], ref["grad"], rtol=1e-4, atol=1e-5)
                else:
                    np.testing.assert_allclose(out[1], ref["grad"], rtol=1e-4, atol=1e-5)
                    np.testing.assert_allclose(out[2], ref["probs"], rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_threads_incrementing_one_variable(graph):
    counter = tf.Variable(0, name="counter")
    inc = tf.assign_add(counter, 1)
    sess = tf.Session()
    sess.run(counter.initializer)

    def worker():
        for _ in range(200):
            sess.run(inc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sess.run(counter) == 800  # assign_add is atomic, as with use_locking=True


# --- more graph features ----------------------------------------------------------------------------------
def test_placeholder_of_unknown_rank(graph, sess):
    x = tf.placeholder(tf.float32, name="anything")
    y = tf.reduce_sum(x * 2.0)
    gx, = tf.gradients(y, [x])
    assert sess.run(y, {x: [1.0, 2.0, 3.0]}) == 12.0
    assert sess.run(y, {x: np.ones((2, 2))}) == 8.0
    np.testing.assert_array_equal(sess.run(gx, {x: np.ones((2, 3))}), np.full((2, 3), 2.0))
    assert sess.run(x, {x: 5.0}) == 5.0


def test_feeding_a_variable_overrides_it_for_one_run(graph, sess):
    W = tf.Variable([[1.0], [2.0]], name="W")
    x = tf.placeholder(tf.float32, [None, 2])
    y = tf.matmul(x, W)
    gW, = tf.gradients(tf.reduce_sum(y), [W])
    sess.run(W.initializer)
    xv = np.array([[1.0, 1.0]], np.float32)
    assert sess.run(y, {x: xv}) == 3.0
    assert sess.run(y, {x: xv, W: [[10.0], [20.0]]}) == 30.0
    np.testing.assert_array_equal(sess.run(gW, {x: xv, W: np.zeros((2, 1))}), [[1.0], [1.0]])
    assert sess.run(y, {x: xv}) == 3.0  # the storage is untouched


def test_variable_initialized_from_another(graph, sess):
    w = tf.Variable(tf.random_normal([3]), name="w")
    w2 = tf.Variable(w.initialized_value() * 2.0, name="w2")
    sess.run(tf.global_variables_initializer())
    a, b = sess.run([w, w2])
    np.testing.assert_allclose(b, 2 * a)
    assert w.value() is w


def test_operations_scopes_and_devices(graph, sess):
    with tf.name_scope("block"):
        tf.placeholder(tf.float32, [2], name="x")
        v = tf.Variable(tf.zeros([2]), name="v")
    with tf.device("/cpu:0"):
        c = tf.constant([1.0, 2.0])
    assert c.device.type == "cpu"
    assert graph.get_operation_by_name("block/x").type == "Placeholder"
    assert v.op.name == "block/v" and v.initializer.type == "Assign" and v.op.type == "VariableV2"
    init = tf.global_variables_initializer()
    assert init.type == "NoOp" and [op.type for op in init.control_inputs] == ["Assign"]
    assert any(op.name == "block/v" for op in graph.get_operations())
    with pytest.raises(KeyError):
        graph.get_operation_by_name("missing")
