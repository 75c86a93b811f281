"""`tf.pad` in every mode, as TF documents it.

https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/pad: modes "CONSTANT", "REFLECT" and
"SYMMETRIC" (case-insensitive), constant_values for CONSTANT; for REFLECT both paddings[D, 0] and
paddings[D, 1] must be no greater than tensor.dim_size(D) - 1, for SYMMETRIC no greater than
tensor.dim_size(D); the padded size is paddings[D, 0] + dim_size(D) + paddings[D, 1]; an unknown mode
is a ValueError. TF's MirrorPad kernel (tensorflow/core/kernels/image/mirror_pad_op.cc) checks the sizes
when the graph runs: InvalidArgumentError "paddings must be less than the dimension size: 2, 1 not less
than 2" (REFLECT) or "paddings must be no greater than the dimension size: 4, 0 greater than 3"
(SYMMETRIC). The shape function (tensorflow/core/ops/array_ops.cc, PadShapeFn) refuses negative
paddings and paddings that are not a [rank, 2] matrix when the graph is built (a ValueError in TF1).
NumPy's np.pad modes "reflect" and "symmetric" are the same layouts and serve as the oracle.
"""

import numpy as np
import pytest

import ember.v1 as tf

T = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
PADDINGS = [[1, 1], [2, 2]]


def test_the_documented_examples(graph, sess):
    t = tf.constant(T)
    assert sess.run(tf.pad(t, PADDINGS, "CONSTANT")).tolist() == [
        [0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0, 0, 0, 0, 0, 0, 0]]
    assert sess.run(tf.pad(t, PADDINGS, "REFLECT")).tolist() == [
        [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]]
    assert sess.run(tf.pad(t, PADDINGS, "SYMMETRIC")).tolist() == [
        [2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2], [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]]
    # paddings may be given as a constant tensor, as the documentation does
    assert sess.run(tf.pad(t, tf.constant(PADDINGS), "SYMMETRIC")).shape == (4, 7)


@pytest.mark.parametrize("mode", ["reflect", "Reflect", "symmetric", "SYMMETRIC", "constant"])
def test_modes_are_case_insensitive(graph, sess, mode):
    out = sess.run(tf.pad(tf.constant(T), PADDINGS, mode))
    np.testing.assert_array_equal(out, np.pad(T, PADDINGS, mode.lower()))


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("paddings", [[[0, 0], [0, 0], [0, 0]], [[1, 0], [0, 2], [1, 1]], [[1, 1], [2, 1], [0, 3]]])
def test_mirror_modes_match_numpy_in_3d(graph, sess, mode, paddings):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    if mode == "REFLECT" and paddings[0] == [1, 1]:
        paddings = [[1, 1], [2, 1], [0, 3]]
    if mode == "REFLECT" and any(max(p) >= n for p, n in zip(paddings, a.shape)):
        pytest.skip("too large for REFLECT")
    out = sess.run(tf.pad(tf.constant(a), paddings, mode))
    np.testing.assert_array_equal(out, np.pad(a, paddings, mode.lower()))


def test_constant_values(graph, sess):
    assert sess.run(tf.pad(tf.constant(T), PADDINGS, constant_values=9))[0].tolist() == [9] * 7
    f = tf.constant([1.0, 2.0])
    assert sess.run(tf.pad(f, [[1, 2]], constant_values=-0.5)).tolist() == [-0.5, 1, 2, -0.5, -0.5]
    c = tf.placeholder(tf.float32, [], name="c")  # a fill value known only when the graph runs
    v = tf.placeholder(tf.float32, [2], name="v")
    padded = tf.pad(v, [[1, 1]], constant_values=c)
    assert sess.run(padded, {c: 7.0, v: [1.0, 2.0]}).tolist() == [7, 1, 2, 7]
    grads = sess.run(tf.gradients(tf.reduce_sum(padded * padded), [v, c]), {c: 3.0, v: [1.0, 2.0]})
    assert grads[0].tolist() == [2.0, 4.0] and grads[1] == 12.0
    with pytest.raises(TypeError, match="Expected int32, got 1.5"):
        tf.pad(tf.constant(T), PADDINGS, constant_values=1.5)
    with pytest.raises(TypeError, match="does not match"):
        tf.pad(f, [[1, 1]], constant_values=tf.constant(1))


def test_unknown_dimensions_give_unknown_padded_sizes_and_are_checked_when_run(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.pad(x, [[2, 0], [1, 1]], "REFLECT")
    assert y.get_shape().as_list() == [None, 5]
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(sess.run(y, {x: a}), np.pad(a, [[2, 0], [1, 1]], "reflect"))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"paddings must be less than the dimension size: 2, 0 not less than 2"):
        sess.run(y, {x: a[:2]})
    z = tf.pad(x, [[4, 0], [0, 0]], "SYMMETRIC")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"paddings must be no greater than the dimension size: 4, 0 greater than 3\n\t \[\[node"):
        sess.run(z, {x: a})


def test_paddings_too_large_for_a_known_size_fail_when_run_as_in_tf(graph, sess):
    t = tf.constant(T)
    y = tf.pad(t, [[2, 1], [0, 0]], "REFLECT")  # TF builds it; its kernel refuses it
    assert y.get_shape().as_list() == [5, 3]
    with pytest.raises(tf.errors.InvalidArgumentError, match="2, 1 not less than 2"):
        sess.run(y)
    assert sess.run(tf.pad(t, [[2, 2], [3, 3]], "SYMMETRIC")).shape == (6, 9)  # up to the size itself


@pytest.mark.parametrize("paddings, message", [
    ([[1, 1]], r"shape \[2, 2\]"),
    ([[1, 1, 1], [1, 1, 1]], r"shape \[2, 2\]"),
    ([[-1, 0], [0, 0]], "Paddings must be non-negative"),
    ([[0.5, 0], [0, 0]], "integer matrix"),
])
def test_bad_paddings_are_value_errors_when_built(graph, paddings, message):
    for mode in ("CONSTANT", "REFLECT"):
        with pytest.raises(ValueError, match=message):
            tf.pad(tf.constant(T), paddings, mode)


def test_an_unknown_mode_is_a_value_error(graph):
    with pytest.raises(ValueError, match="Unknown padding mode: WRAP"):
        tf.pad(tf.constant(T), PADDINGS, "wrap")


@pytest.mark.parametrize("mode", ["CONSTANT", "REFLECT", "SYMMETRIC"])
def test_gradients_match_finite_differences(graph, sess, mode):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    paddings = [[2, 1], [1, 3]]
    w = rng.standard_normal(np.pad(a, paddings).shape)
    x = tf.placeholder(tf.float64, [None, 4], name="x")
    loss = tf.reduce_sum(tf.pad(x, paddings, mode) * tf.constant(w))
    grad = sess.run(tf.gradients(loss, x)[0], {x: a})
    # the loss is linear in x: its gradient is w folded back onto the positions each padded value came from
    expected = np.zeros_like(a)
    eps = 1e-6
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        expected[i] = (sess.run(loss, {x: a + d}) - sess.run(loss, {x: a - d})) / (2 * eps)
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)


def test_second_order_gradients_through_mirror_padding(graph, sess):
    a = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    x = tf.placeholder(tf.float64, [2, 3], name="x")
    y = tf.pad(x, [[1, 1], [2, 1]], "SYMMETRIC")
    g = tf.gradients(tf.reduce_sum(y * y * y), x)[0]  # 3 * fold(y ** 2)
    h = tf.gradients(tf.reduce_sum(g), x)[0]  # 6 * fold(pad(fold(y) ... )): check against finite differences
    got = sess.run(h, {x: a})
    eps = 1e-6
    expected = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        expected[i] = (sess.run(g, {x: a + d}).sum() - sess.run(g, {x: a - d}).sum()) / (2 * eps)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
