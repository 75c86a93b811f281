"""What `ember train` tells and draws: the run header names --jit and --amp, the TensorBoard folder is
echoed, and curves.png labels epochs with whole numbers."""

import importlib.util

import pytest

from ember import cli
from ember.train import History

from .fake_data import fake_mnist

FAST = ["--dataset", "mnist", "--model", "mlp", "--limit", "32", "--batch-size", "16", "--epochs", "1",
        "--no-progress"]


def _header(capsys, tmp_path, *flags) -> list[str]:
    data = fake_mnist(tmp_path / "data")
    assert cli.main(["train", "--data", str(data), "--out", str(tmp_path / "run"), *FAST, *flags]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("flags, note", [([], ""), (["--jit"], ", --jit"), (["--amp"], ", --amp"),
                                         (["--jit", "--amp"], ", --jit --amp")])
def test_header_names_jit_and_amp(capsys, tmp_path, flags, note):
    lines = _header(capsys, tmp_path, *flags)
    assert lines[0].startswith("training mlp (") and lines[0].endswith(f"1 epochs, device cpu{note}"), lines[0]


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="needs the `tensorboard` extra")
def test_tensorboard_folder_is_echoed(capsys, tmp_path):
    logs = tmp_path / "tb"
    lines = _header(capsys, tmp_path, "--tensorboard", str(logs))
    assert lines[1] == f"logging to TensorBoard in {logs} (view with: tensorboard --logdir {logs})"
    assert lines[-1] == f"TensorBoard logs in {logs}"
    assert any(f.name.startswith("events.out.tfevents") for f in logs.iterdir())


@pytest.mark.parametrize("epochs", [1, 4, 20, 37])
def test_curves_label_epochs_with_whole_numbers(epochs):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    history = History()
    for epoch in range(1, epochs + 1):
        history.record(epoch, {"loss": 1 / epoch, "accuracy": 0.5, "val_loss": 1.0, "val_accuracy": 0.4})
    fig = history.figure()
    try:
        for ax in fig.axes:
            low, high = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if low <= t <= high]
            assert len(ticks) >= 1 and all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(fig)
