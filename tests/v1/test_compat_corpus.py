"""The TF1-style programs in examples/compat/tf1 run unchanged on ember.v1.

TensorFlow is not installed here, so what TF1 would give is checked from its documented behaviour:
the tensor names its name scopes make (a second use of a scope becomes "mlp_1"), the default op
names ("Placeholder:0", "Softmax:0", "Variable:0"), training that lowers the loss, and the accuracy
these programs reach (measured with Ember over the programs' fixed seeds; margins in comments).
"""

import json
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "compat" / "tf1"


def _run(name: str) -> dict:
    done = subprocess.run([sys.executable, str(CORPUS / name)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_mnist_softmax_tutorial():
    out = _run("mnist_softmax.py")
    assert out["names"] == ["Placeholder:0", "Softmax:0", "Mean:0", "Variable:0"]
    assert abs(out["losses"][0] - 2.302585) < 1e-5  # ln 10: zero weights give the uniform distribution
    assert out["losses"][-1] < 1.6  # 1.41 measured
    assert out["test_accuracy"] > 0.6  # 0.673 measured


def test_mlp_with_scopes_schedules_and_summaries():
    out = _run("mlp_scopes.py")
    assert out["variables"] == ["mlp/hidden1/weights:0", "mlp/hidden1/biases:0", "mlp/output/weights:0",
                                "mlp/output/biases:0"]
    assert out["names"] == ["input/x:0", "mlp/output/preactivation:0", "mlp_1/output/preactivation:0",
                            "loss/Mean:0", "accuracy/Mean:0"]
    losses = out["losses"]
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert out["logged_losses"] == [round(x, 5) for x in losses[::10]]
    assert abs(out["learning_rate"] - 0.05 * 0.5 ** 2) < 1e-9  # exponential_decay, staircase, after 60 steps
    assert out["accuracy"] > 0.93  # 0.977 measured
