"""tf.gradients: symbolic backward graphs checked against finite differences and NumPy formulas."""

import numpy as np
import pytest

import ember.v1 as tf

rng = np.random.default_rng(2)
C3 = rng.standard_normal((2, 3))
C2 = rng.standard_normal((2, 2))
K = rng.standard_normal((3, 3, 1, 2))

# Scalar functions of x, y ([None, 3] float64 placeholders) and W (a [3, 2] float64 variable).
EXPRESSIONS = {
    "matmul_tanh": lambda x, y, W: tf.reduce_sum(tf.tanh(tf.matmul(x, W)) * C2),
    "mean_squared_error": lambda x, y, W: tf.reduce_mean(tf.square(x - y)),
    "softmax": lambda x, y, W: tf.reduce_sum(tf.nn.softmax(x) * C3),
    "cross_entropy_v2": lambda x, y, W: tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.nn.softmax(y), logits=x)),
    "tutorial_cross_entropy": lambda x, y, W: tf.reduce_mean(
        -tf.reduce_sum(tf.nn.softmax(tf.matmul(y, C3.T)) * tf.log(tf.nn.softmax(tf.matmul(x, W))),
                       reduction_indices=[1])),
    "reduce_max": lambda x, y, W: tf.reduce_sum(tf.reduce_max(x, axis=1) * tf.reduce_min(y, axis=1)),
    "reduce_prod_mean": lambda x, y, W: tf.reduce_sum(tf.reduce_prod(x, 1)) + tf.reduce_mean(y, axis=0)[1],
    "elementwise": lambda x, y, W: tf.reduce_sum(tf.exp(x) / (1 + tf.abs(y)) + tf.sigmoid(x * y)),
    "sqrt_log": lambda x, y, W: tf.reduce_sum(tf.sqrt(tf.square(x) + 1) * tf.log(tf.square(y) + 2)),
    "max_min_pow": lambda x, y, W: tf.reduce_sum(tf.maximum(x, y) * C3 + tf.pow(tf.minimum(x, y) ** 2 + 1, 1.5)),
    "concat_transpose": lambda x, y, W: tf.reduce_sum(tf.concat([x, y * 2], 1) * np.concatenate([C3, C3], 1))
    + tf.reduce_sum(tf.transpose(x) * C3.T),
    "stack_tile_expand": lambda x, y, W: tf.reduce_sum(tf.tile(tf.expand_dims(tf.stack([x, y], 1), 0), [2, 1, 1, 1]) ** 3),
    "gather_where": lambda x, y, W: tf.reduce_sum(tf.gather(x, [0, 2, 2], axis=1) ** 2) + tf.reduce_sum(
        tf.where(tf.greater(x, 0.0), x * y, y * 2)),
    "logsumexp_reshape": lambda x, y, W: tf.reduce_logsumexp(tf.reshape(x * y, [-1])),
    "sigmoid_cross_entropy_l2": lambda x, y, W: tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.sigmoid(y), logits=x)) + tf.nn.l2_loss(W),
    "conv_pool": lambda x, y, W: tf.reduce_sum(tf.nn.avg_pool(tf.nn.max_pool(tf.nn.conv2d(
        tf.reshape(tf.concat([x, y, x * y], 1), [-1, 3, 3, 1]), K, [1, 2, 2, 1], "SAME"),
        [1, 2, 2, 1], [1, 1, 1, 1], "SAME"), [1, 2, 2, 1], [1, 1, 1, 1], "SAME") * 1.7),
}


def _numeric(sess, f, feeds, target, value, eps=1e-6):
    """Central differences of scalar f with respect to `value` fed (or loaded) at `target`."""
    grad = np.zeros_like(value)
    for idx in np.ndindex(value.shape):
        outs = []
        for sign in (1, -1):
            v = value.copy()
            v[idx] += sign * eps
            outs.append(sess.run(f, {**feeds, target: v}))
        grad[idx] = (outs[0] - outs[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_gradients_match_finite_differences(graph, sess, name):
    x = tf.placeholder(tf.float64, [None, 3], name="x")
    y = tf.placeholder(tf.float64, [None, 3], name="y")
    wv = rng.standard_normal((3, 2))
    W = tf.Variable(wv, name="W")
    f = EXPRESSIONS[name](x, y, W)
    assert f.shape == ()
    grads = tf.gradients(f, [x, y, W])
    sess.run(W.initializer)
    xv, yv = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    feeds = {x: xv, y: yv}
    symbolic = sess.run([g for g in grads if g is not None], feeds)
    values = [v for v, g in zip((xv, yv, wv), grads) if g is not None]
    targets = [t for t, g in zip((x, y, W), grads) if g is not None]
    assert symbolic, "no input got a gradient"
    for got, target, value in zip(symbolic, targets, values):
        np.testing.assert_allclose(got, _numeric(sess, f, feeds, target, value), rtol=1e-5, atol=1e-6)


def test_logistic_regression_gradient_formula(graph, sess):
    x = tf.placeholder(tf.float32, [None, 5])
    t = tf.placeholder(tf.float32, [None, 3])
    W = tf.Variable(rng.standard_normal((5, 3)).astype(np.float32))
    b = tf.Variable(np.zeros(3, np.float32))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=t, logits=tf.matmul(x, W) + b))
    gW, gb = tf.gradients(loss, [W, b])
    sess.run(tf.global_variables_initializer())
    xv = rng.standard_normal((8, 5)).astype(np.float32)
    tv = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    got_w, got_b, wv = sess.run([gW, gb, W], {x: xv, t: tv})
    z = xv @ wv
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(got_w, xv.T @ (p - tv) / 8, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, (p - tv).mean(0), rtol=1e-5, atol=1e-6)


def test_unconnected_and_integer_inputs_give_none(graph):
    x = tf.placeholder(tf.float32, [None, 2])
    z = tf.placeholder(tf.float32, [None, 2])
    i = tf.placeholder(tf.int32, [2])
    y = tf.reduce_sum(x * 2.0) + tf.cast(tf.reduce_sum(i), tf.float32)
    gx, gz, gi = tf.gradients(y, [x, z, i])
    assert gx is not None and gz is None and gi is None
    assert tf.gradients(tf.reduce_sum(tf.stop_gradient(x)), [x]) == [None]
    assert tf.gradients(tf.constant(3.0), [x]) == [None]


def test_grad_ys_multiple_ys_and_intermediates(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3])
    h = x * x
    y1, y2 = tf.reduce_sum(h, 1), tf.reduce_sum(3.0 * x)
    gy = tf.placeholder(tf.float32, [None])
    gx, gh = tf.gradients([y1, y2], [x, h], grad_ys=[gy, None])
    xv = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], np.float32)
    wv = np.array([2.0, -1.0], np.float32)
    got_x, got_h = sess.run([gx, gh], {x: xv, gy: wv})
    np.testing.assert_allclose(got_x, 2 * xv * wv[:, None] + 3.0)
    np.testing.assert_allclose(got_h, np.broadcast_to(wv[:, None], (2, 3)))


def test_second_order_gradients(graph, sess):
    x = tf.placeholder(tf.float64, [None])
    y = tf.reduce_sum(x ** 3)
    g, = tf.gradients(y, [x])
    h, = tf.gradients(tf.reduce_sum(g), [x])
    xv = np.array([1.0, -2.0, 0.5])
    got_g, got_h = sess.run([g, h], {x: xv})
    np.testing.assert_allclose(got_g, 3 * xv ** 2)
    np.testing.assert_allclose(got_h, 6 * xv)


def test_labels_get_no_gradient_in_v1_cross_entropy(graph):
    labels = tf.placeholder(tf.float32, [None, 3])
    logits = tf.placeholder(tf.float32, [None, 3])
    v1 = tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    v2 = tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits))
    assert tf.gradients(v1, [labels])[0] is None
    assert tf.gradients(v2, [labels])[0] is not None


@pytest.mark.parametrize("batch", [2, None])
def test_gradients_through_a_variable_read(graph, sess, batch):
    x = tf.placeholder(tf.float32, [batch, 2])  # batch 2: fully known, the graph runs as built
    W = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    y = tf.reduce_mean(tf.matmul(x, tf.identity(W)))
    gW, = tf.gradients(y, [W])
    sess.run(W.initializer)
    xv = np.array([[1.0, 0.0], [2.0, 1.0]], np.float32)
    np.testing.assert_allclose(sess.run(gW, {x: xv}), np.repeat(xv.sum(0)[:, None], 2, 1) / 4)


def test_reduce_max_ties_share_the_gradient(graph, sess):
    x = tf.placeholder(tf.float32, [None])
    g, = tf.gradients(tf.reduce_max(x), [x])
    np.testing.assert_allclose(sess.run(g, {x: [1.0, 3.0, 3.0, 0.0]}), [0.0, 0.5, 0.5, 0.0])


def test_gradients_whose_rules_need_unknown_dims_are_built_per_fed_shape(graph, sess):
    import ember as em

    # Ember's mean divides by the element count and concat's gradient splits by input sizes: with an
    # unknown batch neither can be built ahead, so the backward graph is built when the shapes are fed.
    x = tf.placeholder(tf.float32, [None, 3])
    z = tf.placeholder(tf.float32, [None, 3])
    y = tf.reduce_sum(tf.square(tf.concat([x, x * 2.0], 0))) + em.mean(x) + tf.cast(tf.argmax(z, 1)[0], tf.float32)
    gx, gz = tf.gradients(y, [x, z])
    assert gz is None and gx.shape == (None, 3)
    for n in (2, 5):
        xv = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        got = sess.run(gx, {x: xv, z: np.zeros((n, 3))})
        np.testing.assert_allclose(got, 2 * xv + 8 * xv + 1 / xv.size, rtol=1e-6)
