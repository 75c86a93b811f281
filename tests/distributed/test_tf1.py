"""ember.v1 across processes: /job devices, replica_device_setter, and a ps/worker program that trains."""

import re
import subprocess
import sys

import numpy as np
import pytest

import ember as em
import ember.distributed as dist
import ember.v1 as tf
from ember.distributed import cluster
from ember.v1 import remote
from tests.distributed.launch import PROGRAMS, check, env, requires_mpi, run


@pytest.fixture
def clean():
    yield
    remote._declared[0] = None
    cluster._declared[0] = None
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.mark.parametrize("spec, name", [
    ("/job:ps/task:0", "/job:ps/task:0"),
    ("/job:ps/replica:0/task:1/device:CPU:0", "/job:ps/task:1"),
    ("/job:worker/task:2/cpu:1", "/job:worker/task:2/cpu:1"),
    ("/job:worker", "/job:worker/task:0"),
])
def test_job_device_names(spec, name):
    d = em.device(spec)
    assert str(d) == name and d.type == "cpu" and d is em.device(name) and d is not em.device("cpu")
    with pytest.raises(RuntimeError, match="is a device of another process"):
        em.zeros(2, device=d) + 1


def test_a_bad_job_device_name_is_an_error():
    with pytest.raises(ValueError, match="expected /job:NAME/task:N"):
        em.device("/job:ps/task:0/disk:3")


def test_replica_device_setter_puts_variables_on_ps_tasks_round_robin_and_ops_on_the_worker(clean):
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:1")):
        a = tf.Variable(np.zeros(2, np.float32), name="a")
        b = tf.Variable(np.zeros(2, np.float32), name="b")
        c = tf.Variable(np.zeros(2, np.float32), name="c")
        y = a + b
    assert [str(v.device) for v in (a, b, c)] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert str(y.device) == "/job:worker/task:1"  # this process is no task of a cluster: a device elsewhere
    with pytest.raises(RuntimeError, match="create tf.train.Server"):
        with tf.Session(graph=g) as sess:
            sess.run(y)


def test_a_device_naming_only_the_job_is_this_processs_own_task(clean):
    """replica_device_setter's default worker_device is "/job:worker": on worker 1 its ops are worker 1's."""
    remote.declare_task("worker", 1)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(ps_tasks=1)):
        v = tf.Variable(np.zeros(2, np.float32), name="v")
        y = v + 1.0
    assert str(v.device) == "/job:ps/task:0" and str(y.device) == "cpu"
    with g.as_default():
        with tf.device("/job:ps"):  # another job without a task: its task 0
            z = v * 2.0
        with tf.device("/job:worker/task:0"):  # another task of this job, named
            w = v * 3.0
    assert str(z.device) == "/job:ps/task:0" and str(w.device) == "/job:worker/task:0"


def test_a_local_server_makes_this_process_worker_zero(clean):
    server = tf.train.Server.create_local_server()
    assert (server.job_name, server.task_index) == ("worker", 0)
    g = tf.Graph()
    with g.as_default(), tf.device("/job:worker/task:0"):
        v = tf.Variable(np.ones(3, np.float32))
        total = tf.reduce_sum(v * 2.0)
    assert str(total.device) == "cpu"
    with tf.Session(server.target, graph=g) as sess:
        sess.run(v.initializer)
        assert sess.run(total) == 6.0
    server.join()  # nothing to serve in a world of one


def test_server_checks_the_cluster_against_the_run(clean):
    with pytest.raises(ValueError, match="the cluster has 2 worker and 1 ps tasks, but this run has 1 ranks; start it with ember run -n 3 --servers 1"):
        tf.train.Server(tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "c:1"]}))
    spec = tf.train.ClusterSpec({"worker": {0: "a:1"}})
    assert spec.jobs == ["worker"] and spec.num_tasks("worker") == 1 and spec.as_dict() == {"worker": ["a:1"]}
    with pytest.raises(ValueError, match="rank 0 is /job:worker/task:0"):
        tf.train.Server(spec, job_name="ps", task_index=0)


@requires_mpi
def test_a_ps_worker_program_reaches_the_accuracy_of_its_single_process_version():
    pytest.importorskip("mlxtend")
    out = check(run(3, "tf1_ps.py", "dist", servers=1))
    single = subprocess.run([sys.executable, f"{PROGRAMS}/tf1_ps.py", "single"], env=env(), capture_output=True,
                            text=True, timeout=300)
    assert single.returncode == 0, single.stderr
    want = float(re.search(r"single accuracy ([\d.]+)", single.stdout).group(1))
    got = [float(a) for a in re.findall(r"worker \d accuracy ([\d.]+)", out)]
    assert len(got) == 2 and "ps done" in out and "explicit /job: devices work" in out
    assert want > 0.85 and min(got) > want - 0.03, (got, want)
