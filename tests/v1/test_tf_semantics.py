"""Where TF1 and PyTorch differ, ember.v1 follows TF1: dtypes, gradients at ties and kinks, run-time errors,
variables owned by sessions. The reference values were computed with TensorFlow (tf.compat.v1)."""

import numpy as np
import pytest

import ember.v1 as tf

XV = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
YV = np.array([1.0, 3.0, 3.0, 0.0], np.float32)
RV = np.array([-1.0, 0.0, 3.0, 6.0, 7.0], np.float32)


# --- dtypes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [
    lambda: tf.constant(1) + tf.constant(1.0),
    lambda: tf.constant(1) * 2.5,
    lambda: tf.constant(1, tf.int64) > 0.5,
    lambda: tf.add(tf.constant([1.0]), tf.constant([2])),
    lambda: tf.maximum(tf.constant(1), tf.constant(2.0)),
])
def test_integer_and_float_operands_do_not_mix(graph, build):
    with pytest.raises(TypeError, match="does not mix integer and floating-point"):
        build()


def test_python_ints_join_either_kind_and_floats_keep_promoting(graph, sess):
    assert (tf.constant(2.0) * 3).dtype is tf.float32
    assert (tf.constant(2, tf.int64) * 3).dtype is tf.int64
    assert (tf.constant(1.0) + tf.constant(1.0, tf.float64)).dtype is tf.float64


@pytest.mark.parametrize("build, dtype, value", [
    (lambda: tf.constant([1, 2]) / tf.constant([2, 4]), tf.float64, [0.5, 0.5]),
    (lambda: tf.constant([1, 2]) / 2, tf.float64, [0.5, 1.0]),
    (lambda: tf.constant([1, 2], tf.int16) / 2, tf.float32, [0.5, 1.0]),
    (lambda: tf.truediv(tf.constant(3), tf.constant(2)), tf.float64, 1.5),
    (lambda: tf.constant(7) // 2, tf.int32, 3),
    (lambda: tf.div(tf.constant(7), 2), tf.int32, 3),
    (lambda: tf.constant(7.0) // 2, tf.float32, 3.0),
])
def test_integer_division(graph, sess, build, dtype, value):
    t = build()
    assert t.dtype is dtype
    np.testing.assert_array_equal(sess.run(t), value)


# --- gradients at ties and kinks --------------------------------------------------------------------------
def _grads(sess, f, wrt, feeds):
    return [None if g is None else sess.run(g, feeds).tolist() for g in tf.gradients(f, wrt)]


def test_maximum_and_minimum_give_ties_to_x(graph, sess):
    x, y = tf.placeholder(tf.float32, [4]), tf.placeholder(tf.float32, [4])
    feeds = {x: XV, y: YV}
    assert _grads(sess, tf.reduce_sum(tf.maximum(x, y)), [x, y], feeds) == [[1, 0, 1, 1], [0, 1, 0, 0]]
    assert _grads(sess, tf.reduce_sum(tf.minimum(x, y)), [x, y], feeds) == [[1, 1, 1, 0], [0, 0, 0, 1]]
    nan = sess.run(tf.maximum(tf.constant([np.nan, 1.0]), tf.constant([1.0, np.nan])))
    assert np.isnan(nan).all()  # NaN propagates from either side, as in TF


def test_relu6_clip_and_relu_at_their_kinks(graph, sess):
    r = tf.placeholder(tf.float32, [5])
    feeds = {r: RV}
    assert _grads(sess, tf.reduce_sum(tf.nn.relu6(r)), [r], feeds) == [[0, 0, 1, 0, 0]]
    assert sess.run(tf.nn.relu6(r), feeds).tolist() == [0, 0, 3, 6, 6]
    assert _grads(sess, tf.reduce_sum(tf.nn.relu(r)), [r], feeds) == [[0, 0, 1, 1, 1]]
    assert _grads(sess, tf.reduce_sum(tf.clip_by_value(r, 0.0, 6.0)), [r], feeds) == [[0, 1, 1, 1, 0]]
    assert _grads(sess, tf.reduce_sum(tf.abs(r)), [r], feeds) == [[-1, 0, 1, 1, 1]]


def test_floor_round_and_ceil_have_no_gradient(graph, sess):
    x = tf.placeholder(tf.float32, [4])
    for fn in (tf.floor, tf.round, tf.ceil):
        assert tf.gradients(tf.reduce_sum(fn(x)), [x]) == [None]
    assert _grads(sess, tf.reduce_sum(tf.floor(x) + x), [x], {x: XV}) == [[1, 1, 1, 1]]
    assert sess.run(tf.floor(x), {x: XV + 0.5}).tolist() == [1, 2, 3, 4]


# --- run-time errors --------------------------------------------------------------------------------------
def test_gather_with_an_index_out_of_range_is_an_invalid_argument(graph, sess):
    params = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    idx = tf.placeholder(tf.int32, [None])
    out = tf.gather(params, idx)
    assert sess.run(out, {idx: [0, 2]}).tolist() == [[1, 2], [5, 6]]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = -1 is not in \[0, 3\)"):
        sess.run(out, {idx: [0, -1]})
    with pytest.raises(ValueError, match=r"indices\[0\] = 3 is not in \[0, 3\)"):  # also a ValueError
        sess.run(out, {idx: [3]})


def test_sparse_cross_entropy_with_a_label_out_of_range_is_an_invalid_argument(graph, sess):
    labels = tf.placeholder(tf.int32, [None])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.constant([[1., 2., 3.], [1., 0., 0.]]))
    np.testing.assert_allclose(sess.run(loss, {labels: [0, 2]}), [2.40761, 1.55144], rtol=1e-5)
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(tf.errors.InvalidArgumentError, match="outside the valid range of \\[0, 3\\)"):
            sess.run(loss, {labels: bad})


def test_errors_subclass_op_error_and_the_builtin_ones():
    assert issubclass(tf.errors.InvalidArgumentError, tf.errors.OpError)
    assert issubclass(tf.errors.InvalidArgumentError, ValueError)
    assert issubclass(tf.errors.FailedPreconditionError, RuntimeError)
    assert issubclass(tf.errors.NotFoundError, KeyError) and issubclass(tf.errors.OutOfRangeError, IndexError)
    e = tf.errors.OutOfRangeError(None, None, "End of sequence")
    assert str(e) == "End of sequence" and e.error_code == tf.errors.OUT_OF_RANGE and e.op is None


def test_fed_shapes_that_do_not_fit_are_an_invalid_argument(graph, sess):
    a, b = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shapes \(5, 3\) and \(6, 3\)"):
        sess.run(a * b, {a: np.ones((5, 3)), b: np.ones((6, 3))})


# --- variables belong to sessions ---------------------------------------------------------------------------
def test_two_sessions_of_one_graph_hold_separate_values(graph):
    v = tf.Variable([1.0, 2.0], name="v")
    report = tf.report_uninitialized_variables()
    s1, s2 = tf.Session(), tf.Session()
    s1.run(v.initializer)
    assert s1.run(report).tolist() == [] and s2.run(report).tolist() == [b"v"]
    s1.run(v.assign([5.0, 6.0]))
    s2.run(tf.global_variables_initializer())
    assert s1.run(v).tolist() == [5, 6] and s2.run(v).tolist() == [1, 2]
    assert s2.run(tf.is_variable_initialized(v)) and not tf.Session().run(tf.is_variable_initialized(v))
    with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value v"):
        tf.Session().run(v)
    v.load([7.0, 8.0], s2)
    assert s2.run(v).tolist() == [7, 8] and s1.run(v).tolist() == [5, 6]
    s1.close()
    with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized variables: v"):
        tf.Session().run(tf.assert_variables_initialized())
