"""Softmax regression on MNIST-shaped digits, as in TF1's "MNIST for ML beginners" tutorial.

The digits are synthetic (ten noisy 28x28 templates) so the program needs no download. Run it
as it is with Ember; the TensorFlow original differs only in the import line below. The last line
printed is a JSON summary of the numbers (tests/v1/test_compat_corpus.py compares the two runs).
"""

import json

import numpy as np

import ember.v1 as tf  # TensorFlow: import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()


def synthetic_digits(n, seed):
    """n images of 784 pixels in [0, 1] and their one-hot labels: sparse templates, strokes dropped, specks added."""
    templates = np.random.RandomState(0).rand(10, 784) < 0.12
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, n)
    strokes = templates[labels] & (rng.rand(n, 784) < 0.12)
    specks = rng.rand(n, 784) < 0.1
    images = ((strokes | specks) * rng.uniform(0.5, 1.0, (n, 784))).astype(np.float32)
    return images, np.eye(10, dtype=np.float32)[labels]


train_images, train_labels = synthetic_digits(1000, 1)
test_images, test_labels = synthetic_digits(300, 2)

# The model: y = softmax(x W + b)
x = tf.placeholder(tf.float32, [None, 784])
W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))
y = tf.nn.softmax(tf.matmul(x, W) + b)

# The loss: cross entropy written out, as the tutorial does
y_ = tf.placeholder(tf.float32, [None, 10])
cross_entropy = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y + 1e-10), reduction_indices=[1]))
train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

sess = tf.InteractiveSession()
tf.global_variables_initializer().run()
losses = []
for i in range(30):
    batch_xs = train_images[(i * 100) % 1000:(i * 100) % 1000 + 100]
    batch_ys = train_labels[(i * 100) % 1000:(i * 100) % 1000 + 100]
    _, loss = sess.run([train_step, cross_entropy], feed_dict={x: batch_xs, y_: batch_ys})
    losses.append(float(loss))

correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
test_accuracy = float(sess.run(accuracy, feed_dict={x: test_images, y_: test_labels}))
print("test accuracy:", test_accuracy)
sess.close()

print(json.dumps({
    "losses": losses,
    "test_accuracy": test_accuracy,
    "names": [x.name, y.name, cross_entropy.name, W.name],
}))
