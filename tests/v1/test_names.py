"""Names and introspection as in TF1: op names and scopes, tensor names, .op/.graph, TensorShape, lookups.

The expected names were taken from TensorFlow's tf.compat.v1 running the same statements.
"""

import numpy as np
import pytest

import ember as em
import ember.v1 as tf


def test_default_and_given_names_follow_tf(graph):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    a, b, c = tf.add(x, 1.0), x + 1.0, tf.add(x, 2.0, name="out")
    with tf.name_scope("layer1"):
        m = tf.matmul(x, tf.ones([3, 2]))
        s = tf.reduce_sum(m, name="total")
        with tf.name_scope("inner") as scope:
            r = tf.nn.relu(m)
    assert scope == "layer1/inner/"
    with tf.name_scope("layer1") as again:
        q = tf.square(x)
    assert again == "layer1_1/"  # scopes are made unique
    with tf.name_scope("abs/"):  # a trailing slash re-enters a scope as it is
        t = tf.identity(x)
    with tf.name_scope(None):
        u = tf.negative(x)
    out = tf.constant(1.0, name="out")
    got = [(v.name, v.op.type) for v in (a, b, c, m, s, r, q, t, u, out)]
    assert got == [("Add:0", "AddV2"), ("add_1:0", "AddV2"), ("out:0", "AddV2"), ("layer1/MatMul:0", "MatMul"),
                   ("layer1/total:0", "Sum"), ("layer1/inner/Relu:0", "Relu"), ("layer1_1/Square:0", "Square"),
                   ("abs/Identity:0", "Identity"), ("Neg:0", "Neg"), ("out_1:0", "Const")]
    names = [t.name for t in (tf.nn.softmax(x), tf.cast(x, tf.int32), tf.reshape(x, [-1]), tf.argmax(x, 1),
                              tf.equal(x, x), tf.sigmoid(x), tf.exp(x), tf.concat([x, x], 1))]
    assert names == ["Softmax:0", "Cast:0", "Reshape:0", "ArgMax:0", "Equal:0", "Sigmoid:0", "Exp:0", "concat:0"]


def test_variables_and_their_initializers_are_named(graph):
    v = tf.Variable(tf.zeros([2]), name="v")
    v2 = tf.Variable(tf.zeros([2]), name="v")
    assert (v.name, v2.name, v.op.name, v.op.type) == ("v:0", "v_1:0", "v", "VariableV2")
    assert (v.initializer.name, v2.initializer.name) == ("v/Assign", "v_1/Assign")


def test_tensor_introspection(graph):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.multiply(x, 2.0, name="double")
    z = tf.reduce_sum(y)
    assert y.graph is graph and y.op.graph is graph and y.value_index == 0
    assert y.op.name == "double" and [t.name for t in y.op.inputs][0] == "x:0"
    assert [op.name for op in y.consumers()] == ["Sum"] and z.op.outputs[0].name == "Sum:0"
    assert graph.get_tensor_by_name("double:0").op.name == "double"
    assert graph.get_operation_by_name("x").type == "Placeholder"
    assert str(y) == 'Tensor("double:0", shape=(?, 3), dtype=float32)'
    assert repr(y) == "<tf.Tensor 'double:0' shape=(?, 3) dtype=float32>"
    assert y.op.device == "/device:CPU:0"
    with tf.Session() as sess:
        out = sess.run("double:0", {"x:0": np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))


def test_concrete_tensors_have_no_graph_identity():
    t = em.ones(2)
    assert t.name is None  # as torch.Tensor.name
    with pytest.raises(AttributeError):  # TF1's interface is the graph tensors' (ember.v1.GraphTensor)
        _ = t.op
    with pytest.raises(AttributeError):
        _ = t.graph


def test_get_shape_is_a_tensor_shape_of_dimensions(graph):
    x = tf.placeholder(tf.float32, [None, 3])
    shape = x.get_shape()
    assert isinstance(shape, tf.TensorShape) and shape.as_list() == [None, 3] and shape.ndims == 2
    assert str(shape) == "(?, 3)" and repr(shape[1]) == "Dimension(3)"
    assert shape[0].value is None and int(shape[1]) == 3 and shape[1] == 3 and shape[1] * 2 == 6
    assert (shape[0] == 3) is None and not shape.is_fully_defined() and shape.num_elements() is None
    assert shape == [None, 3] and shape[1:] == tf.TensorShape([3])
    assert tf.placeholder(tf.float32).get_shape().ndims is None
    with pytest.raises(ValueError, match="unknown TensorShape"):
        tf.placeholder(tf.float32).get_shape().as_list()
    assert tf.Variable(tf.zeros([2, 5])).get_shape().as_list() == [2, 5]
    x.set_shape([4, 3])
    assert x.get_shape().as_list() == [4, 3] and tf.reduce_sum(x, 1).get_shape().as_list() == [4]
    with pytest.raises(ValueError, match="incompatible|not compatible"):
        x.set_shape([4, 2])


def test_control_dependencies_none_clears_enclosing_ones(graph):
    x = tf.placeholder(tf.float32, [2])
    a = tf.add(x, 1.0)
    with tf.control_dependencies([a]):
        with tf.control_dependencies(None):
            z1 = tf.identity(x, name="z1")
            with tf.control_dependencies([z1]):
                z3 = tf.identity(x, name="z3")
        z2 = tf.identity(x, name="z2")
    assert [op.name for op in z1.op.control_inputs] == []
    assert [op.name for op in z3.op.control_inputs] == ["z1"]
    assert [op.name for op in z2.op.control_inputs] == ["Add"]


def test_collections_filter_by_scope_as_re_match(graph):
    with tf.name_scope("enc"):
        a = tf.Variable(1.0, name="w")
    b = tf.Variable(1.0, name="dec_w")
    assert tf.global_variables("enc") == [a] and tf.trainable_variables("dec") == [b]
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES) == [a, b]
    graph.finalize()
    with pytest.raises(RuntimeError, match="finalized"):
        tf.constant(1.0)
