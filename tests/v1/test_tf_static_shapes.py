"""Static shapes as TF1 reports them: `get_shape()`, `.shape` and `TensorShape`/`Dimension`, unknowns included.

TF's documented behaviour, from
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/TensorShape and
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/Dimension (the methods and their errors),
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/Tensor#get_shape and #set_shape (static shapes,
refined by set_shape), https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/placeholder (shape=None:
any shape can be fed, so the rank is unknown), and each op's shape function in TF's
tensorflow/core/ops/*.cc (the expected shapes below, for inputs with an unknown batch dimension).
"""

import numpy as np
import pytest

import ember.v1 as tf
from ember.v1.tensor_shape import as_dimension, dimension_at_index


def _shape(t):
    s = t.get_shape()
    return None if s.ndims is None else s.as_list()


# --- TensorShape and Dimension ------------------------------------------------------------------------------
def test_tensor_shape_methods():
    s = tf.TensorShape([None, 3])
    assert s.as_list() == [None, 3] and s.ndims == 2 and s.rank == 2 and len(s) == 2
    assert [d.value for d in s.dims] == [None, 3] and s[1].value == 3 and s[0].value is None
    assert isinstance(s[0], tf.Dimension) and s[1:].as_list() == [3]
    assert not s.is_fully_defined() and s.num_elements() is None
    assert tf.TensorShape([2, 3]).num_elements() == 6 and tf.TensorShape([]).num_elements() == 1
    assert s.is_compatible_with([5, 3]) and not s.is_compatible_with([5, 4]) and not s.is_compatible_with([3])
    assert s.merge_with([5, None]).as_list() == [5, 3]
    assert s.concatenate([7]).as_list() == [None, 3, 7] and (s + tf.TensorShape([7])).as_list() == [None, 3, 7]
    assert s.most_specific_compatible_shape([4, 3]).as_list() == [None, 3]
    assert s.with_rank(2) is s and s.with_rank_at_least(1) is s and s.with_rank_at_most(2) is s
    assert str(s) == "(?, 3)" and str(tf.TensorShape([3])) == "(3,)" and str(tf.TensorShape(None)) == "<unknown>"
    assert repr(s) == "TensorShape([Dimension(None), Dimension(3)])"
    assert tf.TensorShape(3).as_list() == [3]  # a single int is a 1-D shape, as in TF


@pytest.mark.parametrize("call, message", [
    (lambda: tf.TensorShape([None, 3]).merge_with([2, 4]), r"Shapes \(\?, 3\) and \(2, 4\) are not compatible"),
    (lambda: tf.TensorShape([None, 3]).assert_is_compatible_with([2, 4]), "are incompatible"),
    (lambda: tf.TensorShape([None, 3]).with_rank(3), r"Shape \(\?, 3\) must have rank 3"),
    (lambda: tf.TensorShape([None, 3]).with_rank_at_least(3), "must have rank at least 3"),
    (lambda: tf.TensorShape([None, 3]).with_rank_at_most(1), "must have rank at most 1"),
    (lambda: tf.TensorShape([None, 3]).assert_has_rank(1), "must have rank 1"),
    (lambda: tf.TensorShape([None, 3]).assert_same_rank([1]), "must have the same rank"),
    (lambda: tf.TensorShape([None, 3]).assert_is_fully_defined(), "is not fully defined"),
    (lambda: tf.TensorShape(None).as_list(), "as_list\\(\\) is not defined on an unknown TensorShape"),
    (lambda: len(tf.TensorShape(None)), "Cannot take the length of shape with unknown rank"),
    (lambda: list(tf.TensorShape(None)), "Cannot iterate over a shape with unknown rank"),
    (lambda: tf.Dimension(3).merge_with(4), "Dimensions 3 and 4 are not compatible"),
    (lambda: tf.Dimension(-1), "must be >= 0"),
])
def test_tensor_shape_errors_are_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_unknown_rank_shapes():
    s = tf.TensorShape(None)
    assert s.ndims is None and s.dims is None and not s and s.num_elements() is None
    assert s[0].value is None and s[1:3].as_list() == [None, None] and s[1:].ndims is None  # TF's slices of it
    assert s.merge_with([2, None]).as_list() == [2, None] and s.is_compatible_with([1, 2, 3])
    assert s.concatenate([2]).ndims is None and s.with_rank(2).as_list() == [None, None]
    s.assert_has_rank(4)  # an unknown rank may be any rank
    assert dimension_at_index(s, 3).value is None and dimension_at_index([5, 6], 1).value == 6


def test_dimension_arithmetic_and_comparisons():
    d, u = tf.Dimension(6), tf.Dimension(None)
    assert (d + 1).value == 7 and (2 * d).value == 12 and (d // 4).value == 1 and (d - u).value is None
    assert (d == 6) is True and (u == 6) is None and (d < 7) is True and (u > 1) is None
    assert int(d) == 6 and tf.dimension_value(d) == 6 and tf.dimension_value(u) is None
    assert tf.dimension_value(7) == 7 and as_dimension(d) is d and str(u) == "?" and repr(d) == "Dimension(6)"
    assert d.is_compatible_with(u) and not d.is_compatible_with(5) and u.merge_with(6).value == 6
    with pytest.raises(TypeError, match="please use // instead"):
        d / 2
    with pytest.raises(TypeError):
        int(u)


# --- .shape and get_shape() of graph tensors ---------------------------------------------------------------
def test_dot_shape_is_the_static_shape_with_tensor_shape_methods(graph):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    assert x.shape.as_list() == [None, 3] and x.shape.ndims == 2 and x.shape.rank == 2
    assert x.shape[1] == 3 and x.shape[0] is None  # ints and None when indexed (TF 2's TensorShape)
    assert [d.value for d in x.shape.dims] == [None, 3] and x.get_shape()[1].value == 3  # Dimensions (TF1)
    assert x.shape == tf.TensorShape([None, 3]) == x.get_shape() and tuple(x.shape) == (None, 3)
    assert not x.shape.is_fully_defined() and x.shape.num_elements() is None
    assert x.shape.merge_with([4, None]).as_list() == [4, 3] and x.shape.is_compatible_with([7, 3])
    assert str(x.shape) == "(?, 3)" and str(x) == 'Tensor("x:0", shape=(?, 3), dtype=float32)'
    assert tf.constant([[1, 2]]).shape.is_fully_defined() and tf.constant([[1, 2]]).shape.num_elements() == 2
    v = tf.Variable(tf.zeros([3, 4]))
    assert v.shape.as_list() == [3, 4] and v.get_shape().as_list() == [3, 4]


def test_a_placeholder_without_a_shape_has_unknown_rank(graph, sess):
    x = tf.placeholder(tf.float32, name="x")
    assert x.get_shape().ndims is None and x.shape.ndims is None and x.shape.rank is None
    with pytest.raises(ValueError, match="not defined on an unknown TensorShape"):
        x.shape.as_list()
    assert str(x) == 'Tensor("x:0", shape=<unknown>, dtype=float32)'
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    # TF's shape functions: elementwise ops and partial reductions keep the rank unknown; the results'
    # own shapes are known for shape, size, rank, full reductions and reshape.
    for t in (x * 2.0, x + tf.constant([1.0, 2.0, 3.0]), tf.nn.relu(x), tf.reduce_sum(x, 1), tf.cast(x, tf.int32),
              tf.reduce_max(x, -1, keepdims=True), tf.nn.softmax(x), tf.gradients(tf.reduce_sum(x * x), x)[0]):
        assert t.get_shape().ndims is None, t
    assert _shape(tf.shape(x)) == [None] and _shape(tf.size(x)) == [] and _shape(tf.rank(x)) == []
    assert _shape(tf.reduce_sum(x)) == [] and _shape(tf.reduce_logsumexp(x)) == []
    assert _shape(tf.reshape(x, [-1, 6])) == [None, 6] and _shape(tf.reshape(x, [3, 2])) == [3, 2]
    assert _shape(tf.shape(x)[0]) == []
    # ... and the values are the fed tensor's, whatever its rank.
    assert sess.run(tf.size(x), {x: a}) == 6 and sess.run(tf.rank(x), {x: a}) == 2
    assert sess.run(tf.shape(x), {x: a}).tolist() == [2, 3] and sess.run(tf.rank(x), {x: 1.0}) == 0
    np.testing.assert_allclose(sess.run(tf.reduce_logsumexp(x), {x: a}), np.log(np.exp(a).sum()), rtol=1e-6)
    np.testing.assert_allclose(sess.run(tf.reduce_logsumexp(x, -1), {x: a}), np.log(np.exp(a).sum(-1)), rtol=1e-6)
    assert sess.run(tf.reduce_mean(tf.cast(x, tf.int32)), {x: a}) == 2  # 15 // 6
    assert sess.run(tf.reshape(x, [-1, 6]), {x: a}).shape == (1, 6)


def test_set_shape_gives_a_rank_to_a_tensor_of_unknown_rank(graph, sess):
    x = tf.placeholder(tf.float32, name="x")
    x.set_shape([None, 3])
    assert x.get_shape().as_list() == [None, 3] and x.shape.ndims == 2
    y = tf.matmul(x, tf.ones([3, 2]))
    assert y.get_shape().as_list() == [None, 2]
    assert sess.run(y, {x: np.ones((4, 3))}).shape == (4, 2)
    with pytest.raises(ValueError, match="Cannot feed value of shape"):  # fed values must fit the refined shape
        sess.run(y, {x: np.ones((4, 5))})
    with pytest.raises(ValueError, match="not compatible"):
        x.set_shape([None, 4])


def test_ops_that_need_a_rank_say_so_when_it_is_unknown(graph):
    x = tf.placeholder(tf.float32, name="x")
    for build in (lambda: tf.matmul(x, tf.ones([3, 2])), lambda: tf.transpose(x), lambda: x[0],
                  lambda: tf.concat([x, x], 0), lambda: tf.pad(x, [[1, 1]])):
        with pytest.raises(NotImplementedError, match="'x:0' has unknown rank"):
            build()


# --- every op's static shape, as TF's shape functions give it ------------------------------------------------
X = "x"  # [None, 3] float32
IMG = "img"  # [None, 28, 28, 1] float32


def _inputs():
    return {
        X: tf.placeholder(tf.float32, [None, 3], name="x"),
        IMG: tf.placeholder(tf.float32, [None, 28, 28, 1], name="img"),
        "labels": tf.placeholder(tf.int32, [None], name="labels"),
        "ids": tf.placeholder(tf.int32, [None], name="ids"),
        "w": tf.constant(np.ones((3, 4), np.float32)),
        "filt": tf.constant(np.ones((5, 5, 1, 8), np.float32)),
        "col": tf.placeholder(tf.float32, [None, 1, 3], name="col"),
    }


SHAPES = {
    # math
    "add": (lambda i: i[X] + tf.constant([1.0, 2.0, 3.0]), [None, 3]),
    "broadcast_column": (lambda i: i[X] * tf.ones([4, 1, 1]), [4, None, 3]),
    "matmul": (lambda i: tf.matmul(i[X], i["w"]), [None, 4]),
    "matmul_transpose_b": (lambda i: tf.matmul(i["w"], i[X], transpose_a=True, transpose_b=True), [4, None]),
    "reduce_sum_all": (lambda i: tf.reduce_sum(i[X]), []),
    "reduce_sum_0": (lambda i: tf.reduce_sum(i[X], 0), [3]),
    "reduce_mean_1": (lambda i: tf.reduce_mean(i[X], 1), [None]),
    "reduce_max_keepdims": (lambda i: tf.reduce_max(i[X], 1, keepdims=True), [None, 1]),
    "reduce_logsumexp_0": (lambda i: tf.reduce_logsumexp(i[X], 0), [3]),
    "argmax_1": (lambda i: tf.argmax(i[X], 1), [None]),
    "cast": (lambda i: tf.cast(i[X], tf.int32), [None, 3]),
    "add_n": (lambda i: tf.add_n([i[X], i[X], i[X]]), [None, 3]),
    "clip_by_value": (lambda i: tf.clip_by_value(i[X], 0.0, 1.0), [None, 3]),
    "squared_difference": (lambda i: tf.squared_difference(i[X], 1.0), [None, 3]),
    "equal": (lambda i: tf.equal(i[X], 0.0), [None, 3]),
    # arrays
    "concat_0": (lambda i: tf.concat([i[X], i[X]], 0), [None, 3]),
    "concat_1": (lambda i: tf.concat([i[X], i[X]], 1), [None, 6]),
    "stack": (lambda i: tf.stack([i[X], i[X]]), [2, None, 3]),
    "stack_1": (lambda i: tf.stack([i[X], i[X]], axis=1), [None, 2, 3]),
    "expand_dims_0": (lambda i: tf.expand_dims(i[X], 0), [1, None, 3]),
    "expand_dims_last": (lambda i: tf.expand_dims(i[X], -1), [None, 3, 1]),
    "squeeze_axis": (lambda i: tf.squeeze(i["col"], [1]), [None, 3]),
    "tile": (lambda i: tf.tile(i[X], [2, 1]), [None, 3]),
    "tile_known": (lambda i: tf.tile(i["w"], [2, 3]), [6, 12]),
    "transpose": (lambda i: tf.transpose(i[X]), [3, None]),
    "reshape": (lambda i: tf.reshape(i[X], [-1]), [None]),
    "reshape_2": (lambda i: tf.reshape(i[X], [-1, 6]), [None, 6]),
    "gather": (lambda i: tf.gather(i["w"], i["ids"]), [None, 4]),
    "gather_axis_1": (lambda i: tf.gather(i[X], [0, 2], axis=1), [None, 2]),
    "one_hot": (lambda i: tf.one_hot(i["labels"], 10), [None, 10]),
    "where": (lambda i: tf.where(i[X] > 0.0, i[X], -i[X]), [None, 3]),
    "slice": (lambda i: tf.slice(i[X], [0, 1], [-1, 2]), [None, 2]),
    "getitem_row": (lambda i: i[X][0], [3]),
    "getitem_column": (lambda i: i[X][:, 1], [None]),
    "getitem_rows": (lambda i: i[X][1:], [None, 3]),
    "split": (lambda i: tf.split(i[X], 3, axis=1)[0], [None, 1]),
    "pad": (lambda i: tf.pad(i[X], [[1, 1], [2, 2]]), [None, 7]),
    "pad_reflect": (lambda i: tf.pad(i[X], [[0, 0], [2, 2]], "REFLECT"), [None, 7]),
    "pad_symmetric": (lambda i: tf.pad(i[X], [[1, 1], [3, 3]], "SYMMETRIC"), [None, 9]),
    "shape": (lambda i: tf.shape(i[X]), [2]),
    "size": (lambda i: tf.size(i[X]), []),
    "rank": (lambda i: tf.rank(i[X]), []),
    # creation
    "zeros_like": (lambda i: tf.zeros_like(i[X]), [None, 3]),
    "ones": (lambda i: tf.ones([2, 3]), [2, 3]),
    "fill": (lambda i: tf.fill([2, 3], 1.0), [2, 3]),
    "constant_shape": (lambda i: tf.constant(0, shape=[4, 1]), [4, 1]),
    "range": (lambda i: tf.range(5), [5]),
    "linspace": (lambda i: tf.linspace(0.0, 1.0, 4), [4]),
    "random_normal": (lambda i: tf.random_normal([2, 3]), [2, 3]),
    "placeholder_with_default": (lambda i: tf.placeholder_with_default(tf.zeros([2, 2]), [None, 2]), [None, 2]),
    # nn
    "relu": (lambda i: tf.nn.relu(i[X]), [None, 3]),
    "softmax": (lambda i: tf.nn.softmax(i[X]), [None, 3]),
    "bias_add": (lambda i: tf.nn.bias_add(i[X], tf.zeros([3])), [None, 3]),
    "conv2d_same": (lambda i: tf.nn.conv2d(i[IMG], i["filt"], [1, 1, 1, 1], "SAME"), [None, 28, 28, 8]),
    "conv2d_valid": (lambda i: tf.nn.conv2d(i[IMG], i["filt"], [1, 1, 1, 1], "VALID"), [None, 24, 24, 8]),
    "conv2d_stride_2": (lambda i: tf.nn.conv2d(i[IMG], i["filt"], [1, 2, 2, 1], "SAME"), [None, 14, 14, 8]),
    "max_pool": (lambda i: tf.nn.max_pool(i[IMG], [1, 2, 2, 1], [1, 2, 2, 1], "VALID"), [None, 14, 14, 1]),
    "avg_pool_same": (lambda i: tf.nn.avg_pool(i[IMG], [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), [None, 14, 14, 1]),
    "dropout": (lambda i: tf.nn.dropout(i[X], keep_prob=0.5), [None, 3]),
    "sparse_softmax_xent": (lambda i: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=i["labels"], logits=i[X]), [None]),
    "softmax_xent": (lambda i: tf.nn.softmax_cross_entropy_with_logits_v2(labels=i[X], logits=i[X]), [None]),
    "sigmoid_xent": (lambda i: tf.nn.sigmoid_cross_entropy_with_logits(labels=i[X], logits=i[X]), [None, 3]),
    "l2_loss": (lambda i: tf.nn.l2_loss(i[X]), []),
    "embedding_lookup": (lambda i: tf.nn.embedding_lookup(i["w"], i["ids"]), [None, 4]),
    "moments_mean": (lambda i: tf.nn.moments(i[X], [0])[0], [3]),
    # layers
    "dense": (lambda i: tf.layers.dense(i[X], 5), [None, 5]),
    "layers_conv2d": (lambda i: tf.layers.conv2d(i[IMG], 4, 3, padding="same"), [None, 28, 28, 4]),
    "max_pooling2d": (lambda i: tf.layers.max_pooling2d(i[IMG], 2, 2), [None, 14, 14, 1]),
    "flatten": (lambda i: tf.layers.flatten(i[IMG]), [None, 784]),
    # gradients take the static shape of what they are taken with respect to
    "gradient": (lambda i: tf.gradients(tf.reduce_sum(tf.matmul(i[X], i["w"])), i[X])[0], [None, 3]),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_static_shapes_of_every_op(graph, case):
    build, expected = SHAPES[case]
    t = build(_inputs())
    assert t.get_shape().as_list() == expected
    assert t.shape.as_list() == expected and t.get_shape().ndims == len(expected)


def test_squeeze_of_an_unknown_dimension_without_axes_has_unknown_rank(graph):
    # TF's SqueezeShapeFn: with no squeeze_dims, an unknown dimension might be 1, so the rank is unknown.
    col = tf.placeholder(tf.float32, [None, 1, 3])
    assert tf.squeeze(col).get_shape().ndims is None
    assert tf.squeeze(tf.placeholder(tf.float32, [2, 1, 3])).get_shape().as_list() == [2, 3]
