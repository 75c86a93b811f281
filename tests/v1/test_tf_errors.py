"""Errors as TF1 raises them: the `tf.errors` kind, the message in TF's words, the node it came from.

TF's documented behaviour, from https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/errors (the
classes and codes; OpError(node_def, op, message, error_code) with `.op`, `.message`, `.error_code`), its
pages per class (InvalidArgumentError: "an operation receives an invalid argument";
FailedPreconditionError: "most commonly raised when running an operation that reads a tf.Variable before
it has been initialized"; NotFoundError: "a requested entity (e.g., a file or directory) was not found"),
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/placeholder ("This tensor will produce an
error if evaluated"), https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/Graph
(get_tensor_by_name / get_operation_by_name: KeyError or ValueError) and
https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/Session#run (TypeError for fetches and feed
keys of the wrong type, ValueError for invalid ones). The messages are those of TF's kernels (the
placeholder kernel, the integer division kernels' "Integer division by zero"), each followed by the
node as TF appends it ("[[node name]]").
"""

import numpy as np
import pytest

import ember.v1 as tf

CODES = {
    "CancelledError": 1, "UnknownError": 2, "InvalidArgumentError": 3, "DeadlineExceededError": 4,
    "NotFoundError": 5, "AlreadyExistsError": 6, "PermissionDeniedError": 7, "ResourceExhaustedError": 8,
    "FailedPreconditionError": 9, "AbortedError": 10, "OutOfRangeError": 11, "UnimplementedError": 12,
    "InternalError": 13, "UnavailableError": 14, "DataLossError": 15, "UnauthenticatedError": 16,
}


@pytest.mark.parametrize("name", sorted(CODES))
def test_error_classes_and_codes(name):
    cls = getattr(tf.errors, name)
    assert issubclass(cls, tf.errors.OpError) and cls.error_code == CODES[name]
    e = cls(None, None, "what went wrong")
    assert e.message == str(e) == "what went wrong" and e.op is None and e.node_def is None


def test_an_unfed_placeholder_is_an_invalid_argument_naming_it(graph, sess):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(x * 2.0)
    assert str(info.value) == "You must feed a value for placeholder tensor 'x' with dtype float and shape [?,3]" \
                              "\n\t [[node x]]"
    assert info.value.op.name == "x" and info.value.op.type == "Placeholder"
    assert info.value.error_code == tf.errors.INVALID_ARGUMENT
    i = tf.placeholder(tf.int64, name="i")  # of unknown rank: no shape in the message
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"^You must feed a value for placeholder tensor 'i' "
                                                              r"with dtype int64\n"):
        sess.run(i + 1)
    d = tf.placeholder(tf.float64, [], name="scalar")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"with dtype double and shape \[\]"):
        sess.run(d)


def test_an_unfed_placeholder_deep_in_a_graph_that_is_specialised(graph, sess):
    # A fed placeholder of unknown batch makes the run use a copy of the graph made for the fed shapes:
    # the error still names the user's placeholder.
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    scale = tf.placeholder(tf.float32, [None, 2], name="scale")
    y = tf.reduce_sum(x * scale, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="placeholder tensor 'scale'") as info:
        sess.run(y, {x: np.ones((4, 2))})
    assert info.value.op.graph is graph


@pytest.mark.parametrize("build, node", [
    (lambda a, b: a // b, "floordiv"),
    (lambda a, b: a % b, "mod"),
    (lambda a, b: tf.div(a, b), "div"),
    (lambda a, b: tf.floordiv(a, b), "floordiv"),
    (lambda a, b: tf.mod(a, b), "FloorMod"),
])
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_integer_division_by_zero_is_an_invalid_argument(graph, sess, build, node, dtype):
    a, b = tf.placeholder(dtype, [None], name="a"), tf.placeholder(dtype, [None], name="b")
    out = build(a, b)
    assert sess.run(out, {a: [7, -7], b: [2, 2]}).tolist() == ([3, -4] if node != "mod" and "Mod" not in node
                                                                 else [1, 1])
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(out, {a: [7, 1], b: [2, 0]})
    assert str(info.value) == f"Integer division by zero\n\t [[node {node}]]" and info.value.op.name == node


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_float_division_by_zero_is_not_an_error(graph, sess):
    x = tf.placeholder(tf.float32, [2])
    assert sess.run(x / 0.0, {x: [1.0, -1.0]}).tolist() == [np.inf, -np.inf]
    assert sess.run(tf.truediv(tf.constant([1, 2]), tf.constant([0, 0]))).tolist() == [np.inf, np.inf]


def test_an_uninitialized_variable_is_a_failed_precondition(graph, sess):
    v = tf.Variable(1.0, name="v")
    with pytest.raises(tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value v"):
        sess.run(v + 1.0)
    sess.run(v.initializer)
    assert sess.run(v + 1.0) == 2.0


def test_values_a_kernel_cannot_use_are_invalid_arguments_naming_the_node(graph, sess):
    x = tf.placeholder(tf.float32, [None], name="x")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"reshape.*\n\t \[\[node Reshape\]\]$"):
        sess.run(tf.reshape(x, [2, 2]), {x: np.ones(3)})
    w = tf.placeholder(tf.float32, [None, None], name="w")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[\[node MatMul\]\]"):
        sess.run(tf.matmul(w, w), {w: np.ones((2, 3))})
    ids = tf.placeholder(tf.int32, [None], name="ids")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = 5 is not in \[0, 3\)"):
        sess.run(tf.gather(tf.constant([1.0, 2.0, 3.0]), ids), {ids: [5]})


def test_a_missing_checkpoint_is_not_found(tmp_path):
    with pytest.raises(tf.errors.NotFoundError, match="Failed to find any matching files for"):
        tf.train.list_variables(str(tmp_path / "nothing"))
    with pytest.raises(tf.errors.NotFoundError):
        tf.train.load_variable(str(tmp_path / "nothing"), "w")


def test_graph_lookups_raise_tfs_key_and_value_errors(graph):
    tf.placeholder(tf.float32, name="x")
    assert graph.get_tensor_by_name("x:0").name == "x:0" and graph.get_operation_by_name("x").name == "x"
    with pytest.raises(KeyError, match="The name 'nope' refers to an Operation not in the graph."):
        graph.get_operation_by_name("nope")
    with pytest.raises(KeyError, match="The operation, 'nope', does not exist in the graph."):
        graph.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="The operation, 'x', exists but only has 1 outputs."):
        graph.get_tensor_by_name("x:1")
    with pytest.raises(ValueError, match="The name 'x' refers to an Operation, not a Tensor"):
        graph.get_tensor_by_name("x")


def test_bad_fetches_and_feed_keys(graph, sess):
    x = tf.placeholder(tf.float32, [], name="x")
    assert sess.run("x:0", {"x:0": 2.0}) == 2.0 and sess.run(x, {"x": 3.0}) == 3.0
    with pytest.raises(ValueError, match=r"Fetch argument 'nope:0' cannot be interpreted as a Tensor. \(The name"):
        sess.run("nope:0")
    with pytest.raises(TypeError, match="Fetch argument 3 has invalid type"):
        sess.run(3)
    with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor: The name 'nope:0'"):
        sess.run(x, {"nope:0": 1.0})
    with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
        sess.run(x, {x.op: 1.0})
    with tf.Graph().as_default():
        other = tf.placeholder(tf.float32, [], name="other")
    with pytest.raises(TypeError, match="is not an element of this graph"):
        sess.run(x, {x: 1.0, other: 2.0})
    with pytest.raises(TypeError, match="The value of a feed cannot be a tf.Tensor object"):
        sess.run(x, {x: tf.constant(1.0)})
