"""ember.v1 graphs export: a Session's fetches become an ONNX model (placeholders as inputs, the session's
variable values as initializers) that onnx's full checker accepts and onnxruntime runs like the Session."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx_test_helpers import close, ort_session  # noqa: E402

import ember as em  # noqa: E402
import ember.v1 as tf  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _data(n, seed):
    rng = np.random.RandomState(seed)
    return rng.randn(n, 2).astype(np.float32), rng.randint(0, 3, n).astype(np.int64)


def _check(sess, inputs, outputs, feeds_for, path, **kw):
    proto = em.onnx.export_session(sess, inputs, outputs, path, **kw)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    ort = ort_session(path)
    names = [i.name for i in proto.graph.input]
    for n in (5, 2):
        feeds = feeds_for(n)
        want = sess.run(outputs, dict(zip(inputs, feeds)))
        got = ort.run(None, dict(zip(names, feeds)))
        for g, w in zip(got, want):
            close(g, np.asarray(w))
    return proto


def test_trained_mlp_with_loss_and_accuracy(tmp_path):
    with tf.name_scope("input"):
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
    with tf.variable_scope("hidden"):
        w1 = tf.get_variable("weights", [2, 16], initializer=tf.random_normal_initializer(stddev=0.5))
        b1 = tf.get_variable("biases", [16], initializer=tf.zeros_initializer())
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.layers.dense(hidden, 3)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    probs = tf.nn.softmax(logits)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        px, py = _data(64, 0)
        for _ in range(5):
            sess.run(train_op, {x: px, y: py})
        proto = _check(sess, [x, y], [probs, loss, accuracy], lambda n: _data(n, n), tmp_path / "mlp.onnx")
    assert [i.name for i in proto.graph.input] == ["input/x", "input/y"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "input/x_dim0"
    inits = {i.name for i in proto.graph.initializer}
    assert {"hidden/weights", "hidden/biases", "dense/kernel", "dense/bias"} <= inits
    assert not any("Adam" in n for n in inits)  # optimizer state is not part of the inference graph


def test_convnet_with_names_and_dynamic_axes(tmp_path):
    images = tf.placeholder(tf.float32, [None, 8, 8, 1], name="images")
    kernel = tf.Variable(tf.truncated_normal([3, 3, 1, 4], stddev=0.3), name="kernel")
    conv = tf.nn.relu(tf.nn.conv2d(images, kernel, strides=[1, 1, 1, 1], padding="SAME"))
    pooled = tf.nn.max_pool(conv, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    flat = tf.reshape(pooled, [-1, 4 * 4 * 4])
    logits = tf.layers.dense(flat, 5)
    shape = tf.shape(images)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        rng = np.random.RandomState(0)
        proto = _check(sess, [images], [logits, shape], lambda n: (rng.randn(n, 8, 8, 1).astype(np.float32),),
                       tmp_path / "conv.onnx", input_names=["img"], output_names=["logits", "shape"],
                       dynamic_axes={"img": {0: "batch"}})
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_errors(tmp_path):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    keep = tf.placeholder(tf.float32, [], name="scale")
    v = tf.Variable(tf.ones([2]), name="v")
    out = x * keep + v
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="need placeholder 'scale'"):
            em.onnx.export_session(sess, [x], [out], tmp_path / "m.onnx")
        with pytest.raises(ValueError, match="variable 'v' has no value"):
            em.onnx.export_session(sess, [x, keep], [out], tmp_path / "m.onnx")
        with pytest.raises(TypeError, match="must be a tensor of the session's graph"):
            em.onnx.export_session(sess, [em.randn(2)], [out], tmp_path / "m.onnx")
