"""Feeding values into a graph as TF1's Session does: cast to the fed tensor's dtype, checked against its static shape.

https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/Session#run: a fed value "may be a Python
scalar, string, list, or numpy ndarray that can be converted to the same dtype as that tensor", and
its shape is checked for compatibility with the tensor's (TF's Session converts with
np.asarray(value, dtype=tensor.dtype), then raises ValueError "Cannot feed value of shape (2, 4) for
Tensor 'x:0', which has shape '(?, 3)'"; a Python int too large for the dtype is a TypeError, and a
tf.Tensor as a value is a TypeError). One deliberate difference: where the cast would change a value
(1.5 into an int32 placeholder, an int64 beyond int32's range, 2 into a bool placeholder) Ember raises
a TypeError, where TF truncates or wraps the value silently.
"""

import numpy as np
import pytest

import ember as em
import ember.v1 as tf


@pytest.mark.parametrize("dtype, value, expected", [
    (tf.float32, 1.5, 1.5),  # a Python float into float32
    (tf.float32, 3, 3.0),  # an int into a float placeholder
    (tf.float32, [1, 2], [1.0, 2.0]),
    (tf.float32, np.float64(0.1), np.float32(0.1)),  # float64 rounded to float32
    (tf.float32, True, 1.0),
    (tf.float64, np.array([1, 2], np.int64), [1.0, 2.0]),
    (tf.float16, 65504.0, 65504.0),
    (tf.int32, np.array([1.0, -2.0]), [1, -2]),  # whole numbers of any dtype
    (tf.int32, np.int64(2**31 - 1), 2**31 - 1),
    (tf.int64, [1, 2], [1, 2]),
    (tf.uint8, [0, 255], [0, 255]),
    (tf.bool, [1, 0], [True, False]),
    (tf.bool, np.array([1.0, 0.0]), [True, False]),
    (tf.float32, "2.5", 2.5),  # text that NumPy reads as a number, as in TF
    (tf.float32, em.tensor([1.0, 2.0]), [1.0, 2.0]),  # a concrete Ember tensor is data like an array
])
def test_values_are_cast_to_the_placeholders_dtype(graph, sess, dtype, value, expected):
    shape = np.shape(np.asarray(value.numpy() if isinstance(value, em.Tensor) else value))
    p = tf.placeholder(dtype, shape, name="p")
    out = sess.run(p, {p: value})
    assert out.dtype == np.dtype(dtype.np) and np.asarray(out).tolist() == np.asarray(expected).tolist()


@pytest.mark.parametrize("dtype, value, bad", [
    (tf.int32, [1.5, 2.0], "1.5"),
    (tf.int32, np.float32(-0.5), "-0.5"),
    (tf.int64, [np.nan], "nan"),
    (tf.int32, np.array([2**40]), str(2**40)),
    (tf.int32, 2**31, str(2**31)),
    (tf.uint8, [-1, 3], "-1"),
    (tf.bool, [2, 0], "2"),
])
def test_values_the_cast_would_change_are_type_errors(graph, sess, dtype, value, bad):
    p = tf.placeholder(dtype, name="p")
    with pytest.raises(TypeError, match=f"Type of feed value {bad} .*Tensor 'p:0' of dtype {dtype.np.name}"):
        sess.run(p, {p: value})


def test_text_that_is_not_a_number_is_a_value_error(graph, sess):
    p = tf.placeholder(tf.float32, [], name="p")
    with pytest.raises(ValueError, match="Cannot feed value 'abc' for Tensor 'p:0' of dtype float"):
        sess.run(p, {p: "abc"})
    q = tf.placeholder(tf.float32, [None, None], name="q")
    with pytest.raises(ValueError, match="'q:0'"):
        sess.run(q, {q: [[1.0, 2.0], [3.0]]})  # ragged


@pytest.mark.parametrize("fed_shape", [(2, 4), (3,), (1, 3, 1), ()])
def test_shapes_incompatible_with_the_static_shape_are_value_errors(graph, sess, fed_shape):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with pytest.raises(ValueError) as info:
        sess.run(x, {x: np.ones(fed_shape)})
    assert str(info.value) == f"Cannot feed value of shape {fed_shape!r} for Tensor 'x:0', which has shape '(?, 3)'"
    assert not isinstance(info.value, tf.errors.OpError)  # a plain ValueError, as TF raises it


def test_compatible_shapes_and_unknown_ranks(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    assert sess.run(tf.reduce_sum(x), {x: np.ones((5, 3))}) == 15.0
    assert sess.run(tf.reduce_sum(x), {x: np.ones((0, 3))}) == 0.0
    s = tf.placeholder(tf.float32, [], name="s")
    with pytest.raises(ValueError, match=r"shape \(1,\) for Tensor 's:0', which has shape '\(\)'"):
        sess.run(s, {s: [1.0]})
    anything = tf.placeholder(tf.float32, name="anything")  # no shape: any shape can be fed
    for value in (1.0, [1.0, 2.0], np.ones((2, 3, 4))):
        assert sess.run(tf.reduce_sum(anything), {anything: value}) == np.sum(value)


def test_feeding_a_tensor_that_is_not_a_placeholder(graph, sess):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    h = tf.multiply(x, 2.0, name="h")
    y = h + 1.0
    assert sess.run(y, {h: [[10.0, 20.0]]}).tolist() == [[11.0, 21.0]]  # h's value replaced; x is not needed
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2,\) for Tensor 'h:0', which has shape"):
        sess.run(y, {h: [1.0, 2.0]})
    c = tf.constant([1, 2], name="c")
    assert sess.run(c * 2, {c: [5.0, 6.0]}).tolist() == [10, 12]  # cast into c's int32


def test_a_graph_tensor_is_not_a_feed_value(graph, sess):
    x = tf.placeholder(tf.float32, [], name="x")
    with pytest.raises(TypeError, match="The value of a feed cannot be a tf.Tensor object"):
        sess.run(x, {x: tf.constant(1.0)})
