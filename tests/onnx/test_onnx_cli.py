"""`ember export` writes a zoo model as ONNX; onnxruntime runs it with the weights it was given."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_test_helpers import close, ort_session  # noqa: E402

import ember as em  # noqa: E402
from ember.cli import main  # noqa: E402


def test_export_lenet5_with_checkpoint_and_dynamic_batch(tmp_path, capsys):
    em.manual_seed(3)
    model = em.models.get_model("lenet5")
    em.save(model.state_dict(), tmp_path / "w.pt")
    out = tmp_path / "lenet5.onnx"
    assert main(["export", "--model", "lenet5", "--out", str(out), "--dynamic-batch",
                 "--checkpoint", str(tmp_path / "w.pt")]) == 0
    assert "onnx checker passed" in capsys.readouterr().out
    sess = ort_session(out)
    assert [i.name for i in sess.get_inputs()] == ["input"]
    assert sess.get_inputs()[0].shape == ["batch", 1, 28, 28]
    x = em.randn(5, 1, 28, 28)
    model.eval()
    with em.no_grad():
        want = model(x).numpy()
    close(sess.run(["output"], {"input": x.numpy()})[0], want)


def test_export_two_input_model_and_options(tmp_path, capsys):
    out = tmp_path / "ncf.onnx"
    assert main(["export", "--model", "ncf", "--out", str(out), "--input", "3:3", "--opset", "17"]) == 0
    sess = ort_session(out)
    ids = np.array([0, 5, 7], dtype=np.int64)
    assert sess.run(None, {"input_0": ids, "input_1": ids})[0].shape == (3,)
    assert main(["export", "--model", "resnet20", "--out", str(tmp_path / "r.onnx"), "--num-classes", "7",
                 "--input", "1,3,16,16"]) == 0
    assert ort_session(tmp_path / "r.onnx").run(None, {"input": np.zeros((1, 3, 16, 16), np.float32)})[0].shape == (1, 7)


@pytest.mark.parametrize("argv, message", [
    (["--model", "nope"], "unknown model"),
    (["--model", "mlp", "--input", "1,x"], "expected positive integers"),
    (["--model", "mlp", "--opset", "9"], "opset_version must be"),
    (["--model", "ncf", "--input", "3"], "takes 2 inputs"),
])
def test_bad_options_give_one_line(tmp_path, capsys, argv, message):
    assert main(["export", "--out", str(tmp_path / "m.onnx"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
