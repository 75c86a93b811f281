"""tf.train optimizers against TF1's update formulas, and the TF1 MNIST tutorial program."""

import numpy as np
import pytest

import ember.v1 as tf

C = np.array([1.0, -2.0, 0.5], np.float64)
D = np.array([0.5, 1.0, 2.0], np.float64)
W0 = np.array([0.3, -0.1, 0.8], np.float64)


def quadratic(graph):
    """loss = sum(c * w + d * w^2 / 2), whose gradient is c + d * w."""
    w = tf.Variable(W0.copy(), name="w")
    loss = tf.reduce_sum(C * w + 0.5 * D * tf.square(w))
    return w, loss


def grad(w):
    return C + D * w


def run_steps(sess, train_op, w, n):
    sess.run(tf.global_variables_initializer())
    values = []
    for _ in range(n):
        sess.run(train_op)
        values.append(sess.run(w))
    return values


def test_gradient_descent(graph, sess):
    w, loss = quadratic(graph)
    values = run_steps(sess, tf.train.GradientDescentOptimizer(0.1).minimize(loss), w, 4)
    ref = W0.copy()
    for got in values:
        ref = ref - 0.1 * grad(ref)
        np.testing.assert_allclose(got, ref, rtol=1e-12)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(graph, sess, nesterov):
    w, loss = quadratic(graph)
    opt = tf.train.MomentumOptimizer(0.1, momentum=0.9, use_nesterov=nesterov)
    train = opt.minimize(loss)
    assert opt.get_slot_names() == ["momentum"] and opt.get_slot(w, "momentum").name == "w/Momentum:0"
    values = run_steps(sess, train, w, 5)
    ref, accum = W0.copy(), np.zeros(3)
    for got in values:
        g = grad(ref)
        accum = 0.9 * accum + g
        ref = ref - (0.1 * g + 0.1 * 0.9 * accum if nesterov else 0.1 * accum)
        np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(sess.run(opt.get_slot(w, "momentum")), accum, rtol=1e-12)


def test_adam(graph, sess):
    w, loss = quadratic(graph)
    opt = tf.train.AdamOptimizer(learning_rate=0.05, beta1=0.8, beta2=0.95, epsilon=1e-6)
    train = opt.minimize(loss)
    values = run_steps(sess, train, w, 6)
    ref, m, v = W0.copy(), np.zeros(3), np.zeros(3)
    for t, got in enumerate(values, start=1):
        g = grad(ref)
        lr_t = 0.05 * np.sqrt(1 - 0.95 ** t) / (1 - 0.8 ** t)
        m = 0.8 * m + 0.2 * g
        v = 0.95 * v + 0.05 * g * g
        ref = ref - lr_t * m / (np.sqrt(v) + 1e-6)
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    b1p, b2p = _beta_powers(graph)
    np.testing.assert_allclose(sess.run([b1p, b2p]), [0.8 ** 7, 0.95 ** 7], rtol=1e-12)
    np.testing.assert_allclose(sess.run(opt.get_slot(w, "m")), m, rtol=1e-10)
    np.testing.assert_allclose(sess.run(opt.get_slot(w, "v")), v, rtol=1e-10)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(graph, sess, centered):
    w, loss = quadratic(graph)
    opt = tf.train.RMSPropOptimizer(0.05, decay=0.8, momentum=0.5, epsilon=1e-6, centered=centered)
    train = opt.minimize(loss)
    assert opt.get_slot(w, "rms").name == "w/RMSProp:0"
    values = run_steps(sess, train, w, 5)
    ref, ms, mg, mom = W0.copy(), np.ones(3), np.zeros(3), np.zeros(3)  # TF1 starts the mean square at one
    for got in values:
        g = grad(ref)
        ms = 0.8 * ms + 0.2 * g * g
        mg = 0.8 * mg + 0.2 * g
        mom = 0.5 * mom + 0.05 * g / np.sqrt((ms - mg * mg if centered else ms) + 1e-6)
        ref = ref - mom
        np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_adagrad(graph, sess):
    w, loss = quadratic(graph)
    opt = tf.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2)
    values = run_steps(sess, opt.minimize(loss), w, 5)
    ref, acc = W0.copy(), np.full(3, 0.2)
    for got in values:
        g = grad(ref)
        acc = acc + g * g
        ref = ref - 0.3 * g / np.sqrt(acc)
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


def test_learning_rate_schedules(graph, sess):
    step = tf.placeholder(tf.int64, [])
    schedules = {
        "exp": tf.train.exponential_decay(0.1, step, 10, 0.5),
        "exp_stair": tf.train.exponential_decay(0.1, step, 10, 0.5, staircase=True),
        "inverse": tf.train.inverse_time_decay(0.1, step, 10, 0.5),
        "poly": tf.train.polynomial_decay(0.1, step, 20, end_learning_rate=0.01, power=2.0),
        "piecewise": tf.train.piecewise_constant(step, [5, 15], [1.0, 0.5, 0.1]),
    }
    for s in (0, 5, 6, 15, 16, 30):
        got = sess.run(schedules, {step: s})
        p = min(s, 20)
        want = {"exp": 0.1 * 0.5 ** (s / 10), "exp_stair": 0.1 * 0.5 ** (s // 10), "inverse": 0.1 / (1 + 0.5 * s / 10),
                "poly": (0.1 - 0.01) * (1 - p / 20) ** 2 + 0.01, "piecewise": 1.0 if s <= 5 else 0.5 if s <= 15 else 0.1}
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=f"{k} at step {s}")
    assert schedules["exp"].dtype is tf.float32


def _beta_powers(graph):
    names = {v.op_name: v for v in graph.get_collection(tf.GLOBAL_VARIABLES)}
    return names["beta1_power"], names["beta2_power"]


def test_global_step_and_apply_gradients(graph, sess):
    w, loss = quadratic(graph)
    step = tf.Variable(0, trainable=False, name="global_step")
    lr = tf.placeholder(tf.float64, [])
    opt = tf.train.GradientDescentOptimizer(lr)
    pairs = opt.compute_gradients(loss)
    assert [v for _, v in pairs] == [w]
    clipped = [(tf.clip_by_value(g, -0.5, 0.5), v) for g, v in pairs]
    train = opt.apply_gradients(clipped, global_step=step)
    sess.run(tf.global_variables_initializer())
    sess.run(train, {lr: 1.0})
    sess.run(train, {lr: 0.5})
    ref = W0 - np.clip(grad(W0), -0.5, 0.5)
    ref = ref - 0.5 * np.clip(grad(ref), -0.5, 0.5)
    np.testing.assert_allclose(sess.run(w), ref, rtol=1e-12)
    assert sess.run(step) == 2


def test_var_list_and_missing_gradients(graph, sess):
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    loss = tf.square(a) + tf.square(b)
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss, var_list=[a])
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    assert sess.run([a, b]) == [0.5, 2.0]
    unrelated = tf.Variable(3.0)
    with pytest.raises(ValueError, match="No gradients provided"):
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(a), var_list=[unrelated])
    gs = tf.train.get_or_create_global_step()
    assert gs is tf.train.get_or_create_global_step() and gs.dtype is tf.int64


# --- the TF1 MNIST tutorial -------------------------------------------------------------------------------
def softmax_regression_tutorial(train_set, test_images, test_labels, steps: int = 1000, batch: int = 100):
    """The TF1 'MNIST for ML beginners' program, verbatim apart from where the data comes from."""
    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.nn.softmax(tf.matmul(x, W) + b)
    y_ = tf.placeholder(tf.float32, [None, 10])
    cross_entropy = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y), reduction_indices=[1]))
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
    sess = tf.InteractiveSession()
    try:
        tf.global_variables_initializer().run()
        for _ in range(steps):
            batch_xs, batch_ys = train_set.next_batch(batch)
            sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})
        correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
        accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
        return sess.run(accuracy, feed_dict={x: test_images, y_: test_labels})
    finally:
        sess.close()


class _Batches:
    """next_batch over arrays, reshuffled every epoch (the tutorial DataSet's behaviour)."""

    def __init__(self, images, labels, seed=0):
        self.images, self.labels = images, labels
        self.rng = np.random.default_rng(seed)
        self.order, self.pos = self.rng.permutation(len(images)), 0

    def next_batch(self, n):
        if self.pos + n > len(self.order):
            self.order, self.pos = self.rng.permutation(len(self.images)), 0
        idx = self.order[self.pos:self.pos + n]
        self.pos += n
        return self.images[idx], self.labels[idx]


def test_tutorial_program_on_separable_synthetic_data(graph):
    rng = np.random.default_rng(0)
    prototypes = rng.random((10, 784)).astype(np.float32)

    def sample(n):
        labels = rng.integers(0, 10, n)
        images = np.clip(prototypes[labels] + 0.3 * rng.standard_normal((n, 784)), 0, 1).astype(np.float32)
        return images, np.eye(10, dtype=np.float32)[labels]

    train_images, train_labels = sample(2000)
    test_images, test_labels = sample(500)
    acc = softmax_regression_tutorial(_Batches(train_images, train_labels), test_images, test_labels, steps=200)
    assert acc >= 0.95


def test_mnist_tutorial_reaches_85_percent(graph):
    try:
        from ember.datasets import get_mnist

        mnist = get_mnist(flatten=True, onehot=True)
    except (ImportError, AttributeError) as e:
        pytest.skip(f"MNIST is not available here: {e}")
    acc = softmax_regression_tutorial(mnist.train, mnist.test.images, mnist.test.labels)
    assert acc >= 0.85
