"""`ember train --nproc 2`: trains data-parallel end to end, and `--resume` continues a job that was stopped."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.distributed.launch import ROOT, ember, env, requires_mpi

pytestmark = [requires_mpi, pytest.mark.filterwarnings("ignore")]
ARGS = ["--model", "mlp", "--dataset", "digits", "--limit", "600", "--no-progress", "--batch-size", "32"]


@pytest.mark.slow  # about 45 s; test_elastic's default test resumes a data-parallel job from its checkpoint
def test_stopped_job_resumes_from_its_last_checkpoint(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "run"
    ckpt = out / "checkpoint.safetensors"
    # Six short epochs, stopped as soon as the first checkpoint is written (atomically): an epoch takes a
    # fraction of a second here, and a job with fewer epochs or a pause before the stop could finish first.
    cmd = [sys.executable, "-m", "ember", "train", "--nproc", "2", "--epochs", "6", "--out", str(out), *ARGS]
    job = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not ckpt.exists():  # the first epoch's checkpoint: then stop the whole job
            assert job.poll() is None and time.monotonic() < deadline, job.stdout.read() if job.poll() else "slow"
            time.sleep(0.02)
        os.killpg(job.pid, signal.SIGTERM)
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    first = job.stdout.read()
    assert job.returncode != 0 and "epoch   1" in first, first
    resumed = ember("train", "--nproc", "2", "--epochs", "6", "--out", str(out), "--resume", str(ckpt), *ARGS,
                    timeout=300)
    assert resumed.returncode == 0, resumed.stdout
    done = int(re.search(r"resumed from .* at epoch (\d)", resumed.stdout).group(1))
    assert 1 <= done < 6
    assert f"epoch   {done + 1}" in resumed.stdout and "epoch   6" in resumed.stdout
    assert "final test accuracy" in resumed.stdout and "data-parallel on 2 ranks" in resumed.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epoch"] == [1, 2, 3, 4, 5, 6] and len(metrics["val_accuracy"]) == 6, metrics
    assert metrics["val_accuracy"][-1] > 0.8


@pytest.mark.slow
def test_amp_reaches_the_ranks(tmp_path):
    """--amp with --nproc trains in bfloat16 on every rank, and the header says so."""
    pytest.importorskip("sklearn")
    losses = {}
    for amp in ([], ["--amp"]):
        out = tmp_path / f"run{len(amp)}"
        r = ember("train", "--nproc", "2", "--epochs", "1", "--out", str(out), *amp, "--model", "mlp", "--dataset",
                  "digits", "--limit", "128", "--no-progress", "--batch-size", "32")
        assert r.returncode == 0, r.stdout
        assert r.stdout.splitlines()[0].endswith("per rank, --amp" if amp else "per rank"), r.stdout
        losses[bool(amp)] = json.loads((out / "metrics.json").read_text())["loss"][0]
    assert losses[True] != losses[False] and abs(losses[True] - losses[False]) < 0.05, losses
