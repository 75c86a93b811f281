"""variable_scope, get_variable and the initializers, as TF1 (names and messages checked against tf.compat.v1)."""

import numpy as np
import pytest

import ember.v1 as tf


def _layer(x, n):
    w = tf.get_variable("w", [x.get_shape()[1], n], initializer=tf.constant_initializer(0.5))
    b = tf.get_variable("b", [n], initializer=tf.zeros_initializer())
    return tf.matmul(x, w) + b


def test_sharing_variables_with_reuse(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with tf.variable_scope("mlp") as scope:
        assert (scope.name, scope.original_name_scope, scope.reuse) == ("mlp", "mlp/", False)
        h = _layer(x, 4)
        with tf.variable_scope("out"):
            y = _layer(h, 2)
    with tf.variable_scope("mlp", reuse=True) as again:
        assert (again.name, again.original_name_scope, again.reuse) == ("mlp", "mlp_1/", True)
        h2 = _layer(x, 4)
        with tf.variable_scope("out"):
            assert tf.get_variable_scope().reuse is True  # inherited
            y2 = _layer(h2, 2)
    assert (h.name, h2.name) == ("mlp/add:0", "mlp_1/add:0")
    assert [v.name for v in tf.global_variables()] == ["mlp/w:0", "mlp/b:0", "mlp/out/w:0", "mlp/out/b:0"]
    sess.run(tf.global_variables_initializer())
    a, b = sess.run([y, y2], {x: np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(a, np.full((2, 2), 3.0))
    np.testing.assert_array_equal(a, b)


def test_get_variable_errors(graph):
    x = tf.placeholder(tf.float32, [None, 3])
    with tf.variable_scope("mlp"):
        _layer(x, 4)
    with pytest.raises(ValueError, match="Variable mlp/w already exists, disallowed. Did you mean to set reuse=True"):
        with tf.variable_scope("mlp"):
            _layer(x, 4)
    with pytest.raises(ValueError, match="Variable new/w does not exist, or was not created with tf.get_variable"):
        with tf.variable_scope("new", reuse=True):
            _layer(x, 4)
    with pytest.raises(ValueError, match=r"Trying to share variable mlp/w, but specified shape \(3, 5\) and found "
                                         r"shape \(3, 4\)"):
        with tf.variable_scope("mlp", reuse=True):
            _layer(x, 5)
    with pytest.raises(ValueError, match="must be fully defined"):
        tf.get_variable("noshape")


def test_auto_reuse_default_names_and_reentering(graph):
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a1 = tf.get_variable("v", [2])
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a2 = tf.get_variable("v", [2])
    assert a1 is a2 and a1.name == "auto/v:0"
    names = []
    for _ in range(2):
        with tf.variable_scope(None, default_name="block") as s:
            names.append((s.name, s.original_name_scope))
    assert names == [("block", "block/"), ("block_1", "block_1/")]
    inner = []
    with tf.variable_scope("outer"):
        for _ in range(2):
            with tf.variable_scope(None, default_name="block") as s:
                inner.append(s.name)
    with tf.variable_scope("outer", reuse=True):
        with tf.variable_scope(None, default_name="block") as s:
            inner.append(s.name)  # default names start over in a re-entered scope, so reuse finds them
    assert inner == ["outer/block", "outer/block_1", "outer/block"]
    with tf.variable_scope("mlp") as scope:
        pass
    with tf.variable_scope(scope) as s3:
        with tf.name_scope("ns"):
            v = tf.get_variable("nsvar", [1])  # name scopes do not prefix get_variable's names
            c = tf.constant(1.0, name="c")
    assert (s3.name, s3.original_name_scope, v.name, c.name) == ("mlp", "mlp/", "mlp/nsvar:0", "mlp_1/ns/c:0")
    scope.reuse_variables()
    assert scope.reuse is True


def test_initializers_and_scope_defaults(graph, sess):
    with tf.variable_scope("s", initializer=tf.constant_initializer(3.0), dtype=tf.float64):
        d = tf.get_variable("d", [2])
        e = tf.get_variable("e", initializer=tf.constant([1, 2]))
        f = tf.get_variable("f", initializer=np.array([1.0, 2.0]))
    assert (d.dtype, e.dtype, f.dtype) == (tf.float64, tf.int32, tf.float64)
    g = tf.get_variable("g", [20, 30], initializer=tf.glorot_uniform_initializer(seed=1))
    k = tf.get_variable("k", [3, 3, 40, 80], initializer=tf.truncated_normal_initializer(stddev=0.1, seed=2))
    n = tf.get_variable("n", [400], initializer=tf.random_normal_initializer(1.0, 0.5, seed=3))
    u = tf.get_variable("u", [400], initializer=tf.random_uniform_initializer(-2.0, -1.0, seed=4))
    vs = tf.get_variable("vs", [300, 100], initializer=tf.variance_scaling_initializer(2.0, "fan_in", "uniform"))
    o = tf.get_variable("o", [2, 2], initializer=tf.ones_initializer())
    i = tf.get_variable("i", [2], dtype=tf.int32)  # integers default to zeros
    r = tf.get_variable("reg", [3], initializer=tf.ones_initializer(), regularizer=lambda t: tf.reduce_sum(t * t))
    (loss,) = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert r.op.name == "reg" and loss.name.startswith("reg/Regularizer/")
    sess.run(tf.global_variables_initializer())
    dv, ev, fv, gv, kv, nv, uv, vv, ov, iv = sess.run([d, e, f, g, k, n, u, vs, o, i])
    assert dv.tolist() == [3, 3] and ev.tolist() == [1, 2] and fv.tolist() == [1, 2] and sess.run(loss) == 3.0
    limit = np.sqrt(6 / 50)
    assert np.abs(gv).max() <= limit and np.abs(gv).max() > 0.8 * limit
    assert np.abs(kv).max() <= 0.2 and abs(kv.std() - 0.088) < 0.01  # truncated at two stddevs
    assert abs(nv.mean() - 1.0) < 0.1 and abs(nv.std() - 0.5) < 0.1
    assert uv.min() >= -2.0 and uv.max() < -1.0
    assert np.abs(vv).max() <= np.sqrt(3 * 2.0 / 300) and ov.tolist() == [[1, 1], [1, 1]] and iv.tolist() == [0, 0]
    assert [op.name for op in graph.get_operations() if op.name.startswith("s/d/")] == ["s/d/Initializer/Const",
                                                                                       "s/d/Assign"]
