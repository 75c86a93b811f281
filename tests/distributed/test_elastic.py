"""`ember run --max-restarts`: a rank killed mid-run, the job starts again from its last checkpoint and ends with
exactly the weights of an uninterrupted run (a script with ember.distributed.checkpoint, and `ember train`)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ember as em
from tests.distributed.launch import PROGRAMS, ROOT, ember, env, requires_mpi

pytestmark = requires_mpi


def _same(a: dict, b: dict, where: str = "") -> None:
    assert a.keys() == b.keys(), where
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, dict):
            _same(x, y, f"{where}.{k}")
        elif isinstance(x, (list, tuple)):
            assert len(x) == len(y), f"{where}.{k}"
            for i, (u, v) in enumerate(zip(x, y)):
                _same({"_": u}, {"_": v}, f"{where}.{k}[{i}]")
        elif isinstance(x, em.Tensor):
            np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=f"{where}.{k}")
        else:
            assert x == y, f"{where}.{k}: {x!r} != {y!r}"


def test_a_killed_rank_restarts_the_job_from_its_checkpoint_and_it_ends_as_an_uninterrupted_run(tmp_path):
    program = os.path.join(PROGRAMS, "elastic.py")
    whole = ember("run", "-n", 2, program, tmp_path / "a.ckpt", -1, tmp_path / "a.final", timeout=240)
    assert whole.returncode == 0 and "restart" not in whole.stdout, whole.stdout
    # rank 1 dies after step 12: the checkpoint of step 10 is the last, so steps 11-12 run twice
    broken = ember("run", "-n", 2, "--max-restarts", 2, program, tmp_path / "b.ckpt", 11, tmp_path / "b.final",
                   timeout=240)
    out = broken.stdout
    assert broken.returncode == 0, out
    assert "ember run: rank 1 (pid" in out and "was killed by signal 9 (SIGKILL)" in out, out
    assert "restarting it from its last checkpoint (restart 1 of 2)" in out, out
    assert "rank 0: attempt 1 resumes at step 10" in out and "rank 1: attempt 1 resumes at step 10" in out, out
    assert "ember run: the job finished after 1 restart" in out, out
    _same(em.load(tmp_path / "a.final"), em.load(tmp_path / "b.final"))


def test_restarts_are_bounded_and_logged(capsys):
    """elastic.run on a command that always fails: started 1 + max_restarts times, each restart said."""
    from ember.distributed import elastic

    count = "import os; print('attempt', os.environ['EMBER_RESTART_COUNT'], os.environ['TORCHELASTIC_MAX_RESTARTS'])"
    code = elastic.run([sys.executable, "-c", f"{count}; raise SystemExit(3)"], dict(os.environ), 2, grace=30)
    err = capsys.readouterr().err
    assert code == 3
    assert "restarting it from its last checkpoint (restart 1 of 2)" in err and "(restart 2 of 2)" in err, err
    assert "ember run: the job failed (mpiexec exited with status 3 and 2 restarts)" in err, err
    assert elastic.run([sys.executable, "-c", "pass"], dict(os.environ), 2, grace=30) == 0


def _rank_pid(root: int, rank: int) -> int | None:
    """The pid of rank `rank`'s program among the descendants of process `root` (not its supervisor)."""
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        try:
            todo += [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
        except OSError:
            continue
    for pid in seen:
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in environ and b"_supervise.py" not in cmdline and b"ember" in cmdline:
            return pid
    return None


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_ember_train_killed_mid_epoch_restarts_and_ends_with_the_uninterrupted_weights(tmp_path):
    pytest.importorskip("sklearn")
    args = ["--model", "mlp", "--dataset", "digits", "--limit", "600", "--no-progress", "--batch-size", "32",
            "--epochs", "3", "--nproc", "2"]
    whole = ember("train", *args, "--out", tmp_path / "whole", timeout=400)
    assert whole.returncode == 0, whole.stdout
    out = tmp_path / "broken"
    job = subprocess.Popen([sys.executable, "-m", "ember", "train", *args, "--out", str(out), "--max-restarts", "1"],
                           cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoint.safetensors").exists():  # epoch 1 is done: kill rank 1 during epoch 2
            assert job.poll() is None and time.monotonic() < deadline, job.stdout.read() if job.poll() else "slow"
            time.sleep(0.02)
        pid = _rank_pid(job.pid, 1)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        text, _ = job.communicate(timeout=400)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, text
    assert "was killed by signal 9 (SIGKILL)" in text and "(restart 1 of 1)" in text, text
    assert "restart 1: resumed from" in text and "at epoch 1" in text, text
    a, b = em.load(tmp_path / "whole" / "checkpoint.safetensors"), em.load(out / "checkpoint.safetensors")
    assert int(a["epoch"]) == int(b["epoch"]) == 3
    _same(a["model"], b["model"])
    _same(a["optimizer"], b["optimizer"])
