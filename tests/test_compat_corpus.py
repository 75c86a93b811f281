"""The PyTorch- and autograd-style programs in examples/compat run on Ember and on the original
framework, with only their import lines changed, and give the same numbers."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "compat"


def _run(path: Path, original: bool, tmp_path) -> dict:
    """Run a corpus program as it is (Ember), or with each marked import line swapped for the original's."""
    source = path.read_text()
    if original:
        source = re.sub(r"^.*# (?:PyTorch|autograd): (.*)$", lambda m: _original_import(m.group(1)), source, flags=re.M)
        assert "ember" not in source.split('"""', 2)[2], "an import line without a marker"
    script = tmp_path / ("as_original.py" if original else "as_ember.py")  # not ember.py: it would shadow the package
    script.write_text(source)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _original_import(comment: str) -> str:
    """The import line the comment gives ("from torch.utils.data import ..." names the same as Ember's)."""
    return {
        "import torch": "import torch",
        "import torch.nn as nn": "import torch.nn as nn",
        "from torch.utils.data import ...": "from torch.utils.data import DataLoader, TensorDataset",
        "import autograd.numpy as np": "import autograd.numpy as np",
        "from autograd import grad": "from autograd import grad",
    }[comment]


def test_pytorch_classifier_matches_pytorch(tmp_path):
    pytest.importorskip("torch")
    program = CORPUS / "torch" / "mlp_classifier.py"
    ours, theirs = _run(program, False, tmp_path), _run(program, True, tmp_path)
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-4)
    assert ours["accuracy"] == pytest.approx(theirs["accuracy"], abs=1e-6)
    assert ours["lr"] == pytest.approx(theirs["lr"]) == 0.025
    assert ours["reloaded_same"] and theirs["reloaded_same"]


def test_autograd_logistic_regression_matches_autograd(tmp_path):
    pytest.importorskip("autograd")
    program = CORPUS / "autograd" / "logistic_regression.py"
    ours, theirs = _run(program, False, tmp_path), _run(program, True, tmp_path)
    for key in ("initial_loss", "trained_loss", "weights", "gradient"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-10, err_msg=key)
    np.testing.assert_allclose(ours["gradient"], ours["numeric_gradient"], rtol=1e-6)


def test_pytorch_extending_program_matches_pytorch(tmp_path):
    pytest.importorskip("torch")
    program = CORPUS / "torch" / "extending.py"
    ours, theirs = _run(program, False, tmp_path), _run(program, True, tmp_path)
    for key in ("losses", "hook_norms", "averaged_first_weight"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, err_msg=key)
    assert ours["per_sample_shape"] == theirs["per_sample_shape"] == [8, 8, 4]
    assert ours["per_sample_mean_is_batch_grad"] and theirs["per_sample_mean_is_batch_grad"]
