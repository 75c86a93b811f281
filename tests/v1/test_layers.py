"""tf.layers, tf.nn.moments/batch_normalization and placeholder_with_default: a small CNN trained a few steps.

The reference values were computed by TensorFlow (tf.compat.v1 with its legacy Keras layers) running the
same program on the same data.
"""

import numpy as np
import pytest

import ember.v1 as tf


def _cnn():
    rng = np.random.RandomState(1)
    x = tf.placeholder(tf.float32, [None, 6, 6, 2], name="img")
    xv = rng.randn(3, 6, 6, 2).astype(np.float32)
    k1 = rng.randn(3, 3, 2, 4).astype(np.float32) * 0.3
    h = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu, kernel_initializer=tf.constant_initializer(k1))
    p = tf.layers.max_pooling2d(h, 2, 2)
    f = tf.layers.flatten(p)
    w2 = rng.randn(36, 5).astype(np.float32) * 0.2
    training = tf.placeholder_with_default(False, shape=[], name="training")
    d = tf.layers.dropout(f, rate=0.5, training=training)
    logits = tf.layers.dense(d, 5, kernel_initializer=tf.constant_initializer(w2), name="logits")
    return x, xv, h, p, f, training, d, logits


def test_layer_names_shapes_and_variables(graph):
    x, _, h, p, f, _, _, logits = _cnn()
    assert (h.name, p.name, logits.name) == ("conv2d/Relu:0", "max_pooling2d/MaxPool:0", "logits/BiasAdd:0")
    assert p.get_shape().as_list() == [None, 3, 3, 4] and f.get_shape().as_list() == [None, 36]
    assert [v.name for v in tf.global_variables()] == ["conv2d/kernel:0", "conv2d/bias:0", "logits/kernel:0",
                                                      "logits/bias:0"]
    two, three = tf.layers.dense(x[:, 0, 0, :], 3), tf.layers.dense(x[:, 0, 0, :], 3)
    assert (two.name, three.name) == ("dense/BiasAdd:0", "dense_1/BiasAdd:0")
    with tf.variable_scope("shared"):
        a = tf.layers.dense(x[:, 0, 0, :], 3, name="fc")
    with tf.variable_scope("shared", reuse=True):
        b = tf.layers.dense(x[:, 0, 0, :], 3, name="fc")
    assert (a.name, b.name) == ("shared/fc/BiasAdd:0", "shared_1/fc/BiasAdd:0")
    assert len([v for v in tf.global_variables() if v.name.startswith("shared")]) == 2
    with pytest.raises(ValueError, match="last dimension of the inputs to `Dense` should be defined"):
        tf.layers.dense(tf.placeholder(tf.float32, [2, None]), 3)


def test_training_a_cnn_with_rmsprop_adagrad_and_schedules(graph, sess):
    x, xv, _, _, _, training, d, logits = _cnn()
    lab = tf.placeholder(tf.int64, [None])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
    mean, var = tf.nn.moments(logits, axes=[0])
    bn = tf.nn.batch_normalization(logits, mean, var, offset=tf.constant(0.1), scale=tf.constant(2.0),
                                   variance_epsilon=1e-3)
    step = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.1, step, 2, 0.5, staircase=True)
    lr2 = tf.train.piecewise_constant(step, [1, 3], [1.0, 0.5, 0.1])
    train = tf.train.RMSPropOptimizer(lr, decay=0.9, momentum=0.5, epsilon=1e-6).minimize(
        loss + tf.reduce_sum(bn) * 0.01, global_step=step)
    train2 = tf.train.AdagradOptimizer(0.2).minimize(loss, var_list=[v for v in tf.trainable_variables()
                                                                     if "logits" in v.name])
    assert sorted(v.name for v in tf.global_variables() if "/Adagrad" in v.name or "/RMSProp" in v.name)[:3] == [
        "conv2d/bias/RMSProp:0", "conv2d/bias/RMSProp_1:0", "conv2d/kernel/RMSProp:0"]
    sess.run(tf.global_variables_initializer())
    feeds = {x: xv, lab: np.array([0, 3, 4])}
    got = [sess.run([loss, lr, lr2, train], feeds)[:3] for _ in range(4)]
    np.testing.assert_allclose(got, [[2.26902, 0.1, 1.0], [0.52006, 0.1, 1.0], [0.15448, 0.05, 0.5],
                                     [0.08994, 0.05, 0.5]], atol=2e-5)
    np.testing.assert_allclose(sess.run(bn, {x: xv})[0], [2.71092, -2.23299, 0.23726, -1.94302, -1.0326], atol=2e-5)
    m, v = sess.run([mean, var], {x: xv})
    np.testing.assert_allclose(m, [3.45073, -2.74027, -1.81436, 1.23451, 2.37141], atol=2e-5)
    np.testing.assert_allclose(v, [4.32503, 0.14545, 0.17596, 7.31985, 4.643], atol=2e-4)
    np.testing.assert_allclose([sess.run([loss, train2], feeds)[0] for _ in range(2)], [0.04792, 0.02244], atol=2e-5)
    conv_bias, logits_bias = sess.run([tf.trainable_variables()[1], tf.trainable_variables()[3]])
    np.testing.assert_allclose(conv_bias, [-0.04041, -0.05376, -0.08594, -0.00979], atol=2e-5)
    np.testing.assert_allclose(logits_bias, [0.06754, -0.06392, -0.03617, 0.01116, 0.02132], atol=2e-5)
    # The default (False) keeps everything; feeding True drops about half, scaled by 2.
    assert not sess.run(training)
    dropped = sess.run(d, {x: np.ones((50, 6, 6, 2), np.float32), training: True})
    kept = sess.run(d, {x: np.ones((50, 6, 6, 2), np.float32)})
    assert set(np.unique(dropped / np.maximum(kept, 1e-9))) <= {0.0, 2.0} and 0.3 < (dropped == 0).mean() < 0.7


def test_placeholder_with_default_checks_fed_shapes(graph, sess):
    v = tf.placeholder_with_default(tf.constant([[1.0, 2.0]]), shape=[None, 2], name="v")
    assert v.get_shape().as_list() == [None, 2] and v.op.type == "PlaceholderWithDefault"
    assert sess.run(v).tolist() == [[1, 2]]
    assert sess.run(v * 2.0, {v: np.ones((3, 2))}).tolist() == [[2, 2]] * 3
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor 'v:0', which has shape '\(\?, 2\)'"):
        sess.run(v, {v: np.ones(3)})
    with pytest.raises(ValueError, match="does not fit the shape"):
        tf.placeholder_with_default([1.0, 2.0], shape=[3])
