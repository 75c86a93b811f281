"""A rank that raises, is killed, freezes or leaves: the others stop naming it and `ember run` fails.

Each job runs with a 3 s failure-detection timeout; the subprocess timeout is the bound that a hang
would break.
"""

import pytest

from tests.distributed.launch import requires_mpi, run

pytestmark = requires_mpi


def _job(mode, n=2):
    proc = run(n, "faults.py", mode, timeout=120, EMBER_DISTRIBUTED_TIMEOUT=3)
    assert proc.returncode != 0, proc.stdout
    assert "should not happen" not in proc.stdout
    assert "ember run: the job failed" in proc.stdout
    return proc.stdout


def test_a_rank_that_raises_stops_the_others_with_its_error():
    out = _job("raise")
    assert "rank 1 (" in out and "failed: ZeroDivisionError: rank 1 divided by zero; stopping the job" in out
    assert "DistBackendError: all_reduce on rank 0: rank 1 failed: ZeroDivisionError: rank 1 divided by zero" in out


def test_a_rank_killed_with_sigkill_is_named_by_the_launcher():
    out = _job("kill")
    assert "ember run: rank 1 (pid" in out and "was killed by signal 9 (SIGKILL)" in out


def test_a_frozen_rank_is_declared_dead_after_the_timeout():
    out = _job("stop")
    assert "all_reduce on rank 0: rank 1 failed: sent no heartbeat for 3 s" in out


def test_a_rank_that_leaves_early_fails_the_operations_waiting_on_it():
    out = _job("exit")
    assert "all_reduce on rank 0: rank 1 left the job" in out


@pytest.mark.parametrize("mode", ["busy"])
def test_a_rank_busy_outside_mpi_is_stopped_by_its_watchdog(mode):
    out = _job(mode)
    assert "[rank 0] ember.distributed: stopping: rank 1 failed: ValueError: rank 1 failed while rank 0 computes" in out


def test_a_collective_waiting_past_the_timeout_fails_on_every_rank_naming_the_ranks_not_arrived():
    """Rank 1 loops in Python and rank 2 is deadlocked: both keep their heartbeats, so only the collective's own
    timeout (PyTorch's meaning of init_process_group(timeout=...)) can end the wait."""
    out = _job("stuck", n=3)
    head = "all_reduce (collective #2 on group WORLD) timed out: rank 0 waited "
    assert f"DistBackendError: all_reduce on rank 0: {head}" in out, out
    assert "(timeout 3 s), and rank(s) 1, 2 did not call it (rank 1 is at #1, rank 2 is at #1)" in out, out
    for r in (1, 2):  # the ranks that never arrived stop too, saying why
        assert f"[rank {r}] ember.distributed: stopping: {head}" in out, out
