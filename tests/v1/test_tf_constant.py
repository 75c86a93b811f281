"""`tf.constant(value, dtype, shape)` as TF1 (tf.compat.v1.constant) builds it.

https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/constant: "If value is a list, then the
length of the list must be less than or equal to the number of elements implied by the shape argument
(if specified). In the case where the list length is less than the number of elements specified by
shape, the last element in the list will be used to fill the remaining entries." TF's
make_tensor_proto (tensorflow/python/framework/tensor_util.py) raises ValueError "Too many elements
provided. Needed at most N, but received M", and with verify_shape=True a TypeError "Expected Tensor's
shape: ..., got ..."; the values are laid out in order (flattened) and an empty list gives zeros (the
TensorProto rule of tensorflow/core/framework/tensor.cc). A Python float for an integer dtype is a
TypeError ("Expected int32, got 1.5 of type 'float' instead."); NumPy arrays are cast.
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/fill: the value must be a scalar.
"""

import numpy as np
import pytest

import ember.v1 as tf


@pytest.mark.parametrize("value, shape, expected", [
    ([1, 2, 3, 4, 5, 6], (2, 3), [[1, 2, 3], [4, 5, 6]]),  # the documented examples
    (-1.0, [2, 3], [[-1.0] * 3] * 2),
    ([1, 2], [2, 3], [[1, 2, 2], [2, 2, 2]]),  # fewer values: the last one repeats
    ([[1, 2], [3, 4]], [3, 2], [[1, 2], [3, 4], [4, 4]]),  # laid out in order, then the last repeats
    ([7], [4], [7, 7, 7, 7]),
    ([], [2], [0.0, 0.0]),  # no values: zeros
    (5, [0, 3], np.zeros((0, 3)).tolist()),
    (np.arange(4.0), [2, 2], [[0.0, 1.0], [2.0, 3.0]]),
])
def test_values_fill_the_shape(graph, sess, value, shape, expected):
    t = tf.constant(value, shape=shape)
    assert t.get_shape().as_list() == list(shape)
    assert sess.run(t).tolist() == expected


def test_dtypes(graph, sess):
    assert tf.constant([1, 2], shape=[3]).dtype is tf.int32 and tf.constant([1.0], shape=[2]).dtype is tf.float32
    assert tf.constant([], shape=[2]).dtype is tf.float32 and tf.constant(np.arange(2.0)).dtype is tf.float64
    assert sess.run(tf.constant([1, 2], dtype=tf.float64, shape=[3])).tolist() == [1.0, 2.0, 2.0]
    assert sess.run(tf.constant(np.array([1.7, -1.7]), dtype=tf.int32)).tolist() == [1, -1]  # arrays are cast
    with pytest.raises(TypeError, match="Expected int32, got 1.5 of type 'float' instead."):
        tf.constant([1, 1.5], dtype=tf.int32)
    with pytest.raises(TypeError, match="Expected int64, got 2.0 of type 'float' instead."):
        tf.constant(2.0, dtype=tf.int64)


def test_too_many_values_and_verify_shape(graph):
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 2, but received 3"):
        tf.constant([1, 2, 3], shape=[2])
    with pytest.raises(TypeError, match=r"Expected Tensor's shape: \(2, 3\), got \(2,\)."):
        tf.constant([1, 2], shape=[2, 3], verify_shape=True)
    assert tf.constant([[1, 2, 3]], shape=[1, 3], verify_shape=True).get_shape().as_list() == [1, 3]
    with pytest.raises(TypeError, match="must be fully known"):
        tf.constant(1, shape=[None, 2])


def test_fill_takes_a_scalar(graph, sess):
    assert sess.run(tf.fill([2, 2], 3)).tolist() == [[3, 3], [3, 3]]
    with pytest.raises(ValueError, match="must be a scalar"):
        tf.fill([2, 3], [1, 2])
