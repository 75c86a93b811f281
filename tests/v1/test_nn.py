"""tf.nn convolution and pooling (NHWC, TF's SAME/VALID rule), dropout, and random ops drawn at each run."""

import math

import numpy as np
import pytest

import ember as em
import ember.v1 as tf
from ember.ops import random_ops

rng = np.random.default_rng(1)


def tf_same_pads(size, k, stride, dilation=1):
    """TF's documented SAME rule: output ceil(size / stride), the odd padding pixel at the end."""
    out = math.ceil(size / stride)
    eff = (k - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def np_conv2d(x, w, strides, padding, dilation=(1, 1)):
    """Direct NHWC x HWIO convolution."""
    kh, kw = w.shape[:2]
    if padding == "SAME":
        (t, b), (l, r) = tf_same_pads(x.shape[1], kh, strides[0], dilation[0]), tf_same_pads(x.shape[2], kw,
                                                                                              strides[1], dilation[1])
        x = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    eh, ew = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    oh = (x.shape[1] - eh) // strides[0] + 1
    ow = (x.shape[2] - ew) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * strides[0]: i * strides[0] + eh: dilation[0], j * strides[1]: j * strides[1] + ew: dilation[1], :]
            out[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w)
    return out


def np_pool(x, k, strides, padding, reduce):
    """Direct NHWC pooling; SAME windows see only real pixels (TF's rule for max and average)."""
    n, h, w, c = x.shape
    if padding == "SAME":
        (t, _), (l, _) = tf_same_pads(h, k[0], strides[0]), tf_same_pads(w, k[1], strides[1])
        oh, ow = math.ceil(h / strides[0]), math.ceil(w / strides[1])
    else:
        t = l = 0
        oh, ow = (h - k[0]) // strides[0] + 1, (w - k[1]) // strides[1] + 1
    out = np.zeros((n, oh, ow, c), x.dtype)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * strides[0] - t, j * strides[1] - l
            win = x[:, max(r0, 0): r0 + k[0], max(c0, 0): c0 + k[1], :]
            out[:, i, j, :] = reduce(win, axis=(1, 2))
    return out


CONV_CASES = [
    # (input NHWC, filter HWIO, strides, padding, dilations)
    ((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 7, 7, 3), (3, 3, 3, 4), (2, 2), "SAME", (1, 1)),  # symmetric padding, strided
    ((1, 8, 6, 2), (3, 2, 2, 3), (2, 2), "SAME", (1, 1)),  # asymmetric: the extra row/column at the end
    ((1, 8, 8, 2), (4, 4, 2, 2), (1, 1), "SAME", (1, 1)),  # even kernel: asymmetric at stride 1
    ((2, 7, 5, 3), (3, 2, 3, 2), (2, 1), "VALID", (1, 1)),
    ((1, 9, 9, 1), (3, 3, 1, 2), (1, 1), "SAME", (2, 2)),  # dilated
]


@pytest.mark.parametrize("xs, ws, strides, padding, dil", CONV_CASES)
def test_conv2d_matches_direct_convolution(graph, sess, xs, ws, strides, padding, dil):
    xv = rng.standard_normal(xs).astype(np.float32)
    wv = rng.standard_normal(ws).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, xs[1], xs[2], xs[3]])
    out = tf.nn.conv2d(x, tf.constant(wv), strides=[1, *strides, 1], padding=padding, dilations=[1, *dil, 1])
    got = sess.run(out, {x: xv})
    want = np_conv2d(xv.astype(np.float64), wv.astype(np.float64), strides, padding, dil)
    assert out.shape == (None,) + want.shape[1:]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv2d_same_puts_the_odd_padding_at_the_end(graph, sess):
    # 4x4 input, 3x3 ones filter, stride 2: TF pads 0 rows above and 1 below (same for columns).
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    out = sess.run(tf.nn.conv2d(x, np.ones((3, 3, 1, 1), np.float32), strides=[1, 2, 2, 1], padding="SAME"))
    grid = x[0, :, :, 0]
    assert out.shape == (1, 2, 2, 1)
    assert out[0, 0, 0, 0] == grid[0:3, 0:3].sum()
    assert out[0, 1, 1, 0] == grid[2:4, 2:4].sum()


@pytest.mark.parametrize("k, s, padding", [((2, 2), (2, 2), "SAME"), ((3, 3), (2, 2), "SAME"), ((3, 2), (1, 2), "VALID"),
                                           ((2, 2), (2, 2), "VALID"), ((3, 3), (1, 1), "SAME")])
def test_max_and_avg_pool(graph, sess, k, s, padding):
    xv = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 7, 6, 3])
    mp = tf.nn.max_pool(x, ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding)
    ap = tf.nn.avg_pool(x, ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding)
    got_max, got_avg = sess.run([mp, ap], {x: xv})
    np.testing.assert_array_equal(got_max, np_pool(xv, k, s, padding, np.max))
    np.testing.assert_allclose(got_avg, np_pool(xv, k, s, padding, np.mean), rtol=1e-5, atol=1e-6)


def test_max_pool_same_never_picks_padding(graph, sess):
    xv = -np.ones((1, 3, 3, 1), np.float32) * np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    got = sess.run(tf.nn.max_pool(xv, [1, 2, 2, 1], [1, 2, 2, 1], "SAME"))
    assert got[0, 1, 1, 0] == -9.0  # the only real pixel of the last window (zeros would win otherwise)


def test_conv_net_gradients_with_unknown_batch(graph, sess):
    x = tf.placeholder(tf.float32, [None, 28 * 28])
    img = tf.reshape(x, [-1, 28, 28, 1])
    w1 = tf.Variable(tf.truncated_normal([5, 5, 1, 4], stddev=0.1))
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(img, w1, [1, 1, 1, 1], "SAME")), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    flat = tf.reshape(h, [-1, 14 * 14 * 4])
    w2 = tf.Variable(tf.truncated_normal([14 * 14 * 4, 10], stddev=0.1))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([1, 2, 3]), logits=tf.matmul(flat, w2)))
    g1, g2 = tf.gradients(loss, [w1, w2])
    assert g1.shape == (5, 5, 1, 4) and g2.shape == (784, 10)
    sess.run(tf.global_variables_initializer())
    a, b = sess.run([g1, g2], {x: rng.random((3, 784)).astype(np.float32)})
    assert a.shape == (5, 5, 1, 4) and np.isfinite(a).all() and np.abs(b).sum() > 0


# --- dropout -------------------------------------------------------------------------------------------
def test_dropout_fresh_mask_each_run_and_scaling(graph, sess):
    x = tf.placeholder(tf.float32, [None, 1000])
    keep = tf.placeholder(tf.float32)
    d = tf.nn.dropout(x, keep)
    ones = np.ones((4, 1000), np.float32)
    a = sess.run(d, {x: ones, keep: 0.25})
    b = sess.run(d, {x: ones, keep: 0.25})
    assert set(np.unique(a)) <= {0.0, 4.0}
    assert abs((a != 0).mean() - 0.25) < 0.03
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(sess.run(d, {x: ones, keep: 1.0}), ones)


def test_dropout_rate_noise_shape_and_gradient(graph, sess):
    x = tf.placeholder(tf.float32, [None, 50])
    d = tf.nn.dropout(x, rate=0.5, noise_shape=[None, 1])
    gx, = tf.gradients(tf.reduce_sum(d), [x])
    out, grad = sess.run([d, gx], {x: np.ones((40, 50), np.float32)})
    rows = out[:, 0]
    assert np.all(out == rows[:, None])  # whole rows kept or dropped
    assert set(np.unique(rows)) <= {0.0, 2.0}
    np.testing.assert_array_equal(grad, out)  # d/dx of sum(x * mask / keep) is mask / keep, here equal to out
    assert tf.nn.dropout(x, keep_prob=1.0) is x
    with pytest.raises(ValueError, match="exactly one"):
        tf.nn.dropout(x, keep_prob=0.5, rate=0.5)


# --- random ops ----------------------------------------------------------------------------------------
def test_random_ops_draw_fresh_values_each_run(graph, sess):
    ops = [tf.random_normal([500]), tf.random_uniform([500]), tf.truncated_normal([500])]
    first, second = sess.run(ops), sess.run(ops)
    for a, b in zip(first, second):
        assert a.shape == (500,) and a.dtype == np.float32
        assert not np.array_equal(a, b)


def test_random_distributions(graph, sess):
    n, u, t, ints, n64 = sess.run([
        tf.random_normal([20000], mean=3.0, stddev=2.0),
        tf.random_uniform([20000], minval=-1.0, maxval=5.0),
        tf.truncated_normal([20000], mean=1.0, stddev=0.5),
        tf.random_uniform([1000], minval=2, maxval=7, dtype=tf.int32),
        tf.random_normal([3, 2], dtype=tf.float64),
    ])
    assert abs(n.mean() - 3.0) < 0.1 and abs(n.std() - 2.0) < 0.1
    assert u.min() >= -1.0 and u.max() < 5.0 and abs(u.mean() - 2.0) < 0.1
    assert np.abs(t - 1.0).max() <= 1.0 and abs(t.std() - 0.5 * 0.8796) < 0.02  # std of a 2-sigma truncation
    assert ints.dtype == np.int32 and set(np.unique(ints)) == {2, 3, 4, 5, 6}
    assert n64.dtype == np.float64 and n64.shape == (3, 2)


def test_random_tensor_parameters(graph, sess):
    mean = tf.placeholder(tf.float32, [])
    out = sess.run(tf.random_normal([2000], mean=mean, stddev=0.01), {mean: 7.0})
    assert abs(out.mean() - 7.0) < 0.01
    with pytest.raises(ValueError, match="maxval"):
        tf.random_uniform([2], dtype=tf.int32)


def test_random_seeds_repeat_across_graphs():
    def draw(op_seed=None, graph_seed=None):
        with tf.Graph().as_default():
            if graph_seed is not None:
                tf.set_random_seed(graph_seed)
            r = tf.random_normal([5], seed=op_seed)
            r2 = tf.random_uniform([3])
            with tf.Session() as s:
                return s.run([r, r2]), s.run(r)

    (a1, _), a2 = draw(op_seed=3)
    (b1, _), b2 = draw(op_seed=3)
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2)  # the op's stream moves on between runs
    (g1, u1), _ = draw(graph_seed=5)
    (g2, u2), _ = draw(graph_seed=5)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(u1, u2)


def test_random_variable_initializer_draws_again(graph, sess):
    w = tf.Variable(tf.random_normal([4, 4]))
    sess.run(w.initializer)
    a, a_again = sess.run(w), sess.run(w)
    sess.run(w.initializer)
    np.testing.assert_array_equal(a, a_again)
    assert not np.array_equal(a, sess.run(w))


def test_eager_random_functions():
    t = random_ops.random_normal((3, 4), mean=1.0, std=0.5, dtype=em.float64)
    assert t.shape == (3, 4) and t.dtype is em.float64
    np.testing.assert_array_equal(random_ops.random_uniform((5,), seed=2).numpy(),
                                  random_ops.random_uniform((5,), seed=2).numpy())
    i = random_ops.random_integers((100,), 0, 3)
    assert i.dtype is em.int64 and set(np.unique(i.numpy())) <= {0, 1, 2}
    assert np.abs(random_ops.truncated_normal((1000,)).numpy()).max() <= 2
    meta = random_ops.random_normal((2, 3), device="meta")
    assert meta.shape == (2, 3) and meta.is_meta
    with pytest.raises(TypeError, match="floating point"):
        random_ops.random_normal((2,), dtype=em.int32)
