"""A TF1 between-graph replicated program: variables on the ps task, each worker runs Session.run(train_op).

`single` trains the same model in one process for the same number of steps; both print their test
accuracy on the MNIST sample.
"""

import sys

import numpy as np

import ember as em
import ember.v1 as tf

STEPS, BATCH = 300, 64


def model():
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    w = tf.Variable(tf.zeros([784, 10]), name="w")
    b = tf.Variable(tf.zeros([10]), name="b")
    logits = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    return x, y, train, accuracy, w


def data():
    d = em.datasets.mnist_sample()
    xs, ys = (t.numpy() for t in d.train.tensors)
    xt, yt = (t.numpy() for t in d.test.tensors)
    return xs.reshape(len(ys), -1), ys, xt.reshape(len(yt), -1), yt


def single():
    xs, ys, xt, yt = data()
    x, y, train, accuracy, _ = model()
    rng = np.random.default_rng(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(STEPS):
            idx = rng.choice(len(ys), BATCH)
            sess.run(train, {x: xs[idx], y: ys[idx]})
        print(f"single accuracy {sess.run(accuracy, {x: xt, y: yt}):.4f}", flush=True)


def explicit_devices():
    """tf.device with job names: a variable and an op on the ps, the rest on this worker."""
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.array([1.0, 2.0], np.float32), name="explicit")
            doubled = v * 2.0
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(doubled) + 1.0
        assert str(doubled.device) == "/job:ps/task:0" and str(total.device) == "cpu"
        with tf.Session(graph=g) as sess:
            sess.run(v.initializer)
            assert sess.run(total) == 7.0 and sess.run(doubled).tolist() == [2.0, 4.0]
            sess.run(v.assign_add(np.array([1.0, 1.0], np.float32)))
            assert sess.run(total) == 11.0
    print("explicit /job: devices work", flush=True)


def distributed():
    cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]})
    server = tf.train.Server(cluster)
    if server.job_name == "ps":
        server.join()
        print("ps done", flush=True)
        return
    task = server.task_index
    xs, ys, xt, yt = data()
    # the default worker_device, "/job:worker", is this worker's own task on every worker (as in TensorFlow)
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x, y, train, accuracy, w = model()
    assert str(w.device) == "/job:ps/task:0" and str(x.device) == "cpu", (w.device, x.device)
    if task == 0:
        explicit_devices()
    if task == 0:  # an error on the ps reaches the worker as its own type, naming where it happened
        try:
            tf.Session(server.target).run(w)
        except tf.errors.FailedPreconditionError as e:
            assert "uninitialized value w" in str(e) and "(on /job:ps/task:0)" in str(e), e
        else:
            raise AssertionError("reading an uninitialised variable on the ps must fail")
    rng = np.random.default_rng(task)
    hooks = [tf.train.StopAtStepHook(last_step=STEPS)]
    steps = 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0, hooks=hooks) as sess:
        while not sess.should_stop():
            idx = rng.choice(len(ys), BATCH)
            sess.run(train, {x: xs[idx], y: ys[idx]})
            steps += 1
        acc = sess.run(accuracy, {x: xt, y: yt})
    assert 0 < steps < STEPS, steps  # the workers shared the steps
    print(f"worker {task} accuracy {acc:.4f} after {steps} of its own steps", flush=True)


if __name__ == "__main__":
    single() if sys.argv[1] == "single" else distributed()
