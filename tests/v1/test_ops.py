"""Every ember.v1 op against a NumPy reference, run through Session.run.

Each row is run twice: fed through placeholders whose dimensions are all unknown (None), and
called on NumPy data directly (which becomes graph constants).
"""

from dataclasses import dataclass, field

import numpy as np
import pytest

import ember.v1 as tf

rng = np.random.default_rng(0)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def pos(*shape):
    return rng.uniform(0.5, 3.0, shape).astype(np.float32)


def i32(*shape, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int32)


def bools(*shape):
    return rng.random(shape) > 0.5


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@dataclass
class Row:
    name: str
    fn: object  # (tf functions) -> tensor or list of tensors
    ref: object  # NumPy reference with the same arguments
    inputs: list = field(default_factory=list)
    known: bool = False  # placeholders keep the inputs' shapes (op needs static sizes)
    tensors_only: bool = False  # Python operators: NumPy data would not make graph tensors
    rtol: float = 1e-5
    atol: float = 1e-6

    def __repr__(self) -> str:
        return self.name


A, B = f32(3, 4), f32(3, 4)
M34, M45 = f32(3, 4), f32(4, 5)
X234 = f32(2, 3, 4)
LOGITS = f32(5, 7) * 3
LABELS = np_softmax(f32(5, 7))
SPARSE = rng.integers(0, 7, 5).astype(np.int64)

ROWS = [
    # arithmetic and comparisons
    Row("add", lambda a, b: tf.add(a, b), np.add, [A, B]),
    Row("add_broadcast", lambda a, b: tf.add(a, b), np.add, [A, f32(4)]),
    Row("subtract", lambda a, b: tf.subtract(a, b), np.subtract, [A, B]),
    Row("multiply", lambda a, b: tf.multiply(a, b), np.multiply, [A, B]),
    Row("divide", lambda a, b: tf.divide(a, b), np.divide, [A, pos(3, 4)]),
    Row("div_int", lambda a, b: tf.div(a, b), np.floor_divide, [i32(6), np.array([2, 3, 4, 5, 6, 7], np.int32)]),
    Row("maximum", lambda a, b: tf.maximum(a, b), np.maximum, [A, B]),
    Row("minimum", lambda a, b: tf.minimum(a, b), np.minimum, [A, B]),
    Row("squared_difference", lambda a, b: tf.squared_difference(a, b), lambda a, b: (a - b) ** 2, [A, B]),
    Row("pow", lambda a, b: tf.pow(a, b), np.power, [pos(3, 4), f32(3, 4)]),
    Row("add_n", lambda a, b: tf.add_n([a, b, a]), lambda a, b: a + b + a, [A, B]),
    Row("equal", lambda a, b: tf.equal(a, b), np.equal, [i32(10, lo=0, hi=3), i32(10, lo=0, hi=3)]),
    Row("not_equal", lambda a, b: tf.not_equal(a, b), np.not_equal, [i32(10, lo=0, hi=3), i32(10, lo=0, hi=3)]),
    Row("less", lambda a, b: tf.less(a, b), np.less, [A, B]),
    Row("less_equal", lambda a, b: tf.less_equal(a, b), np.less_equal, [i32(8), i32(8)]),
    Row("greater", lambda a, b: tf.greater(a, b), np.greater, [A, B]),
    Row("greater_equal", lambda a, b: tf.greater_equal(a, b), np.greater_equal, [i32(8), i32(8)]),
    Row("logical_and", lambda a, b: tf.logical_and(a, b), np.logical_and, [bools(6), bools(6)]),
    Row("logical_or", lambda a, b: tf.logical_or(a, b), np.logical_or, [bools(6), bools(6)]),
    Row("logical_not", lambda a: tf.logical_not(a), np.logical_not, [bools(6)]),
    Row("operators", lambda a, b: (a + b) * a - b / 2.0, lambda a, b: (a + b) * a - b / 2.0, [A, B],
        tensors_only=True),
    # elementwise functions
    Row("exp", lambda a: tf.exp(a), np.exp, [A]),
    Row("log", lambda a: tf.log(a), np.log, [pos(3, 4)]),
    Row("log1p", lambda a: tf.log1p(a), np.log1p, [pos(3, 4)]),
    Row("sqrt", lambda a: tf.sqrt(a), np.sqrt, [pos(3, 4)]),
    Row("rsqrt", lambda a: tf.rsqrt(a), lambda a: 1 / np.sqrt(a), [pos(3, 4)]),
    Row("square", lambda a: tf.square(a), np.square, [A]),
    Row("tanh", lambda a: tf.tanh(a), np.tanh, [A]),
    Row("sigmoid", lambda a: tf.sigmoid(a), lambda a: 1 / (1 + np.exp(-a)), [A]),
    Row("abs", lambda a: tf.abs(a), np.abs, [A]),
    Row("negative", lambda a: tf.negative(a), np.negative, [A]),
    Row("sign", lambda a: tf.sign(a), np.sign, [np.array([-2.0, 0.0, 3.0], np.float32)]),
    Row("floor", lambda a: tf.floor(a), np.floor, [A]),
    Row("ceil", lambda a: tf.ceil(a), np.ceil, [A]),
    Row("round", lambda a: tf.round(a), np.round, [np.array([0.5, 1.5, 2.5, -0.5, 1.2], np.float32)]),
    Row("sin", lambda a: tf.sin(a), np.sin, [A]),
    Row("cos", lambda a: tf.cos(a), np.cos, [A]),
    Row("reciprocal", lambda a: tf.reciprocal(a), np.reciprocal, [pos(3, 4)]),
    Row("clip_by_value", lambda a: tf.clip_by_value(a, -0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0), [A]),
    Row("cast_float_to_int", lambda a: tf.cast(a, tf.int32), lambda a: a.astype(np.int32),
        [np.array([-1.7, -0.2, 0.6, 2.9], np.float32)]),
    Row("cast_int_to_float", lambda a: tf.cast(a, tf.float32), lambda a: a.astype(np.float32), [i32(5)]),
    Row("cast_bool_to_float", lambda a: tf.cast(a, tf.float32), lambda a: a.astype(np.float32), [bools(5)]),
    # matrix products
    Row("matmul", lambda a, b: tf.matmul(a, b), np.matmul, [M34, M45]),
    Row("matmul_transpose_a", lambda a, b: tf.matmul(a, b, transpose_a=True), lambda a, b: a.T @ b, [f32(4, 3), M45]),
    Row("matmul_transpose_b", lambda a, b: tf.matmul(a, b, transpose_b=True), lambda a, b: a @ b.T, [M34, f32(5, 4)]),
    Row("matmul_batched", lambda a, b: tf.matmul(a, b), np.matmul, [f32(2, 3, 4), f32(2, 4, 5)]),
    # reductions
    Row("reduce_sum_all", lambda a: tf.reduce_sum(a), np.sum, [X234], rtol=1e-5, atol=1e-5),
    Row("reduce_sum_axis", lambda a: tf.reduce_sum(a, axis=1), lambda a: a.sum(1), [X234]),
    Row("reduce_sum_axes_keepdims", lambda a: tf.reduce_sum(a, axis=[0, 2], keepdims=True),
        lambda a: a.sum((0, 2), keepdims=True), [X234]),
    Row("reduce_sum_reduction_indices", lambda a: tf.reduce_sum(a, reduction_indices=[1]), lambda a: a.sum(1), [X234]),
    Row("reduce_sum_keep_dims", lambda a: tf.reduce_sum(a, 2, keep_dims=True), lambda a: a.sum(2, keepdims=True),
        [X234]),
    Row("reduce_sum_int", lambda a: tf.reduce_sum(a, 0), lambda a: a.sum(0).astype(np.int32), [i32(4, 3)]),
    Row("reduce_mean_all", lambda a: tf.reduce_mean(a), np.mean, [X234]),
    Row("reduce_mean_axis", lambda a: tf.reduce_mean(a, axis=-1), lambda a: a.mean(-1), [X234]),
    Row("reduce_mean_keepdims", lambda a: tf.reduce_mean(a, [0, 1], keepdims=True),
        lambda a: a.mean((0, 1), keepdims=True), [X234]),
    Row("reduce_mean_int_truncates", lambda a: tf.reduce_mean(a),
        lambda a: np.int32(np.trunc(a.sum() / a.size)), [np.array([-3, -4, 0], np.int32)]),
    Row("reduce_max", lambda a: tf.reduce_max(a, axis=1), lambda a: a.max(1), [X234]),
    Row("reduce_min", lambda a: tf.reduce_min(a, axis=[0, 2]), lambda a: a.min((0, 2)), [X234]),
    Row("reduce_prod", lambda a: tf.reduce_prod(a, axis=0), lambda a: a.prod(0), [f32(3, 4)]),
    Row("reduce_all", lambda a: tf.reduce_all(a, axis=1), lambda a: a.all(1), [bools(3, 4)]),
    Row("reduce_any", lambda a: tf.reduce_any(a), np.any, [bools(3, 4)]),
    Row("reduce_logsumexp", lambda a: tf.reduce_logsumexp(a, axis=1),
        lambda a: np.log(np.exp(a).sum(1)), [f32(3, 4)]),
    Row("argmax_default_axis0", lambda a: tf.argmax(a), lambda a: a.argmax(0), [f32(5, 3)]),
    Row("argmax_axis1", lambda a: tf.argmax(a, 1), lambda a: a.argmax(1), [f32(5, 3)]),
    Row("argmin_axis1", lambda a: tf.argmin(a, axis=1), lambda a: a.argmin(1), [f32(5, 3)]),
    # array ops
    Row("reshape", lambda a: tf.reshape(a, [-1, 2, 2]), lambda a: a.reshape(-1, 2, 2), [X234]),
    Row("transpose_default", lambda a: tf.transpose(a), lambda a: a.transpose(), [X234]),
    Row("transpose_perm", lambda a: tf.transpose(a, perm=[1, 0, 2]), lambda a: a.transpose(1, 0, 2), [X234]),
    Row("concat", lambda a, b: tf.concat([a, b], 1), lambda a, b: np.concatenate([a, b], 1), [A, f32(3, 2)]),
    Row("concat_axis0", lambda a, b: tf.concat([a, b], axis=0), lambda a, b: np.concatenate([a, b], 0), [A, B]),
    Row("stack", lambda a, b: tf.stack([a, b], axis=1), lambda a, b: np.stack([a, b], 1), [A, B]),
    Row("unstack", lambda a: tf.unstack(a, axis=1), lambda a: list(np.moveaxis(a, 1, 0)), [X234], known=True),
    Row("expand_dims", lambda a: tf.expand_dims(a, 1), lambda a: np.expand_dims(a, 1), [A]),
    Row("expand_dims_last", lambda a: tf.expand_dims(a, -1), lambda a: np.expand_dims(a, -1), [A]),
    Row("squeeze_all", lambda a: tf.squeeze(a), np.squeeze, [f32(3, 1, 4, 1)], known=True),
    Row("squeeze_axis", lambda a: tf.squeeze(a, [3]), lambda a: a.squeeze(3), [f32(3, 1, 4, 1)]),
    Row("tile", lambda a: tf.tile(a, [2, 3]), lambda a: np.tile(a, (2, 3)), [A]),
    Row("one_hot", lambda i: tf.one_hot(i, 5), lambda i: np.eye(5, dtype=np.float32)[i] * (i >= 0)[:, None],
        [np.array([0, 3, 4, -1], np.int32)]),
    Row("one_hot_on_off_dtype", lambda i: tf.one_hot(i, 3, on_value=5, off_value=-1, dtype=tf.int32),
        lambda i: np.where(np.eye(3, dtype=bool)[i], 5, -1).astype(np.int32), [np.array([2, 0], np.int64)]),
    Row("one_hot_axis0", lambda i: tf.one_hot(i, 4, axis=0), lambda i: np.eye(4, dtype=np.float32)[i].T,
        [np.array([1, 3, 0], np.int32)]),
    Row("where", lambda c, a, b: tf.where(c, a, b), np.where, [bools(3, 4), A, B]),
    Row("where_rows", lambda c, a, b: tf.where(c, a, b), lambda c, a, b: np.where(c[:, None], a, b),
        [bools(3), A, B]),
    Row("gather", lambda p, i: tf.gather(p, i), lambda p, i: p[i], [A, np.array([2, 0, 2], np.int32)]),
    Row("gather_axis1", lambda p, i: tf.gather(p, i, axis=1), lambda p, i: p[:, i], [A, np.array([3, 1], np.int64)]),
    Row("slice", lambda a: tf.slice(a, [1, 0, 1], [1, -1, 2]), lambda a: a[1:2, :, 1:3], [X234]),
    Row("split", lambda a: tf.split(a, 2, axis=2), lambda a: np.split(a, 2, axis=2), [X234], known=True),
    Row("split_sizes", lambda a: tf.split(a, [1, 3], 2), lambda a: np.split(a, [1], axis=2), [X234], known=True),
    Row("pad", lambda a: tf.pad(a, [[1, 0], [2, 1]]), lambda a: np.pad(a, ((1, 0), (2, 1))), [A]),
    Row("pad_reflect", lambda a: tf.pad(a, [[1, 1], [2, 1]], "REFLECT"),
        lambda a: np.pad(a, ((1, 1), (2, 1)), mode="reflect"), [A], known=True),
    Row("identity", lambda a: tf.identity(a), lambda a: a, [A]),
    Row("stop_gradient", lambda a: tf.stop_gradient(a), lambda a: a, [A]),
    Row("shape", lambda a: tf.shape(a), lambda a: np.array(a.shape, np.int32), [X234]),
    Row("size", lambda a: tf.size(a), lambda a: np.int32(a.size), [X234]),
    Row("rank", lambda a: tf.rank(a), lambda a: np.int32(a.ndim), [X234]),
    Row("zeros_like", lambda a: tf.zeros_like(a), np.zeros_like, [A]),
    Row("ones_like", lambda a: tf.ones_like(a), np.ones_like, [i32(3, 2)]),
    # nn
    Row("relu", lambda a: tf.nn.relu(a), lambda a: np.maximum(a, 0), [A]),
    Row("relu6", lambda a: tf.nn.relu6(a * 5), lambda a: np.clip(a * 5, 0, 6), [A]),
    Row("elu", lambda a: tf.nn.elu(a), lambda a: np.where(a > 0, a, np.expm1(a)), [A]),
    Row("leaky_relu", lambda a: tf.nn.leaky_relu(a), lambda a: np.where(a > 0, a, 0.2 * a), [A]),
    Row("softplus", lambda a: tf.nn.softplus(a), lambda a: np.log1p(np.exp(a)), [A]),
    Row("softsign", lambda a: tf.nn.softsign(a), lambda a: a / (np.abs(a) + 1), [A]),
    Row("nn_sigmoid", lambda a: tf.nn.sigmoid(a), lambda a: 1 / (1 + np.exp(-a)), [A]),
    Row("nn_tanh", lambda a: tf.nn.tanh(a), np.tanh, [A]),
    Row("softmax", lambda a: tf.nn.softmax(a), np_softmax, [LOGITS]),
    Row("softmax_axis0", lambda a: tf.nn.softmax(a, axis=0), lambda a: np_softmax(a, 0), [LOGITS]),
    Row("log_softmax", lambda a: tf.nn.log_softmax(a), np_log_softmax, [LOGITS]),
    Row("softmax_cross_entropy_with_logits", lambda y, z: tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=z),
        lambda y, z: -(y * np_log_softmax(z)).sum(-1), [LABELS, LOGITS]),
    Row("softmax_cross_entropy_with_logits_v2",
        lambda y, z: tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=z),
        lambda y, z: -(y * np_log_softmax(z)).sum(-1), [LABELS, LOGITS]),
    Row("sparse_softmax_cross_entropy_with_logits",
        lambda y, z: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z),
        lambda y, z: -np_log_softmax(z)[np.arange(len(y)), y], [SPARSE, LOGITS], known=True),
    Row("sigmoid_cross_entropy_with_logits",
        lambda y, z: tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z),
        lambda y, z: -(y * np.log(1 / (1 + np.exp(-z))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-z)))),
        [rng.random((4, 3)).astype(np.float32), f32(4, 3)], rtol=1e-5, atol=1e-5),
    Row("l2_loss", lambda a: tf.nn.l2_loss(a), lambda a: (a ** 2).sum() / 2, [A]),
    Row("bias_add", lambda a, b: tf.nn.bias_add(a, b), np.add, [X234, f32(4)]),
    Row("embedding_lookup", lambda p, i: tf.nn.embedding_lookup(p, i), lambda p, i: p[i],
        [f32(6, 3), np.array([[0, 5], [2, 2]], np.int32)], known=True),
]


def _dtype(a):
    return {np.dtype(np.float32): tf.float32, np.dtype(np.float64): tf.float64, np.dtype(np.int32): tf.int32,
            np.dtype(np.int64): tf.int64, np.dtype(np.bool_): tf.bool}[a.dtype]


def _check(got, want, row):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _check(g, w, row)
        return
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=row.rtol, atol=row.atol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_fed_through_placeholders(row):
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(_dtype(a), a.shape if row.known else [None] * a.ndim) for a in row.inputs]
        out = row.fn(*phs)
        with tf.Session() as sess:
            got = sess.run(out, feed_dict=dict(zip(phs, row.inputs)))
    _check(got, row.ref(*row.inputs), row)


@pytest.mark.parametrize("row", [r for r in ROWS if not r.tensors_only], ids=repr)
def test_on_numpy_data(row):
    g = tf.Graph()
    with g.as_default():
        out = row.fn(*row.inputs)
        with tf.Session() as sess:
            got = sess.run(out)
    _check(got, row.ref(*row.inputs), row)


def test_static_shapes_keep_unknown_dims(graph):
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    y = tf.nn.softmax(tf.matmul(x, W) + tf.zeros([10]))
    assert y.shape == (None, 10)
    assert tf.reduce_sum(y, axis=1).shape == (None,)
    assert tf.reshape(x, [-1, 28, 28, 1]).shape == (None, 28, 28, 1)
    assert tf.argmax(y, 1).dtype is tf.int64


@pytest.mark.parametrize("value, dtype", [(1.5, np.float32), (2, np.int32), (True, np.bool_),
                                          ([[1.0, 2.0]], np.float32), (np.arange(3.0), np.float64)])
def test_constant_dtypes(graph, sess, value, dtype):
    got = sess.run(tf.constant(value))
    assert np.asarray(got).dtype == dtype
    np.testing.assert_array_equal(got, np.asarray(value))


def test_creation_functions(graph, sess):
    got = sess.run({
        "zeros": tf.zeros([2, 3]), "ones": tf.ones((2,), dtype=tf.int32), "fill": tf.fill([2, 2], 7),
        "const_shape": tf.constant(3.0, shape=[2, 2]), "const_reshape": tf.constant([1, 2, 3, 4], shape=[2, 2]),
        "range": tf.range(2, 10, 3), "linspace": tf.linspace(0.0, 1.0, 5),
        "const_dtype": tf.constant([1, 2], dtype=tf.float64),
    })
    np.testing.assert_array_equal(got["zeros"], np.zeros((2, 3), np.float32))
    assert got["ones"].dtype == np.int32 and got["ones"].tolist() == [1, 1]
    assert got["fill"].tolist() == [[7, 7], [7, 7]] and got["fill"].dtype == np.int32
    np.testing.assert_array_equal(got["const_shape"], np.full((2, 2), 3.0, np.float32))
    assert got["const_reshape"].tolist() == [[1, 2], [3, 4]]
    assert got["range"].tolist() == [2, 5, 8] and got["range"].dtype == np.int32
    np.testing.assert_allclose(got["linspace"], np.linspace(0, 1, 5))
    assert got["const_dtype"].dtype == np.float64
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 4, but received 5"):
        tf.constant([1, 2, 3, 4, 5], shape=[2, 2])


def test_dtypes_are_embers():
    import ember as em

    assert tf.float32 is em.float32 and tf.int64 is em.int64 and tf.bool is em.bool
