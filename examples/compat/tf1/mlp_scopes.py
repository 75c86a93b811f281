"""A two-layer MLP on the spiral data set, built with name scopes, variable scopes and get_variable.

The layer function makes its weights with tf.get_variable inside tf.variable_scope, so the
evaluation tower reuses the training tower's variables (reuse=True). Adam runs on an
exponentially decaying learning rate; the loss is logged with tf.summary to an event file and read
back with tf.train.summary_iterator. Weights start from fixed NumPy arrays so both frameworks start
from the same point. Run it with Ember as it is; the TensorFlow original differs only in the import
line below.
"""

import glob
import json
import tempfile

import numpy as np

import ember.v1 as tf  # TensorFlow: import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()


def spiral(points_per_class, classes, seed):
    """The classic spiral data set: `classes` interleaved arms in the plane."""
    rng = np.random.RandomState(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.0, 1.0, points_per_class)
        t = np.linspace(c * 4, (c + 1) * 4, points_per_class) + rng.randn(points_per_class) * 0.2
        xs.append(np.c_[r * np.sin(t), r * np.cos(t)])
        ys.append(np.full(points_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


init = np.random.RandomState(42)
INITIAL = {"hidden1": init.randn(2, 64).astype(np.float32) * 0.5, "output": init.randn(64, 3).astype(np.float32) * 0.1}


def layer(inputs, units, name, activation=None):
    """activation(inputs @ weights + biases), its variables made (or reused) in variable scope `name`."""
    with tf.variable_scope(name):
        weights = tf.get_variable("weights", [inputs.get_shape()[1], units],
                                  initializer=tf.constant_initializer(INITIAL[name]))
        biases = tf.get_variable("biases", [units], initializer=tf.zeros_initializer())
        preactivation = tf.add(tf.matmul(inputs, weights), biases, name="preactivation")
        return activation(preactivation, name="activation") if activation else preactivation


def model(inputs, reuse=False):
    with tf.variable_scope("mlp", reuse=reuse):
        hidden = layer(inputs, 64, "hidden1", tf.nn.relu)
        return layer(hidden, 3, "output")


points, labels = spiral(100, 3, seed=0)
with tf.name_scope("input"):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
logits = model(x)
eval_logits = model(x, reuse=True)  # a second tower sharing the variables
with tf.name_scope("loss"):
    cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    tf.summary.scalar("cross_entropy", cross_entropy)
with tf.name_scope("accuracy"):
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(eval_logits, 1), y), tf.float32))
global_step = tf.train.get_or_create_global_step()
learning_rate = tf.train.exponential_decay(0.05, global_step, 25, 0.5, staircase=True)
train_op = tf.train.AdamOptimizer(learning_rate).minimize(cross_entropy, global_step=global_step)
merged = tf.summary.merge_all()

logdir = tempfile.mkdtemp()
writer = tf.summary.FileWriter(logdir, tf.get_default_graph())
losses = []
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(60):
        summary, loss, _ = sess.run([merged, cross_entropy, train_op], {x: points, y: labels})
        writer.add_summary(summary, step)
        losses.append(float(loss))
    final_accuracy = float(sess.run(accuracy, {x: points, y: labels}))
    final_rate = float(sess.run(learning_rate))
writer.close()
logged = [(e.step, round(float(v.simple_value), 5)) for path in glob.glob(logdir + "/events.out.tfevents.*")
          for e in tf.train.summary_iterator(path) for v in e.summary.value if v.tag == "loss/cross_entropy"]
print("accuracy:", final_accuracy)

print(json.dumps({
    "losses": losses,
    "accuracy": final_accuracy,
    "learning_rate": final_rate,
    "logged_losses": [v for _, v in sorted(logged)][::10],
    "variables": [v.name for v in tf.trainable_variables()],
    "names": [x.name, logits.name, eval_logits.name, cross_entropy.name, accuracy.name],
}))
