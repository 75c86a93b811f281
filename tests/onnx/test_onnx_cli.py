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


def _train_checkpoint(path, model="mlp", dataset="digits", prefix=""):
    """A checkpoint as `ember train` writes it (`--nproc` prefixes the weights with "module."): model and settings."""
    from ember.train import recipe

    em.manual_seed(0)
    net = recipe.build_model(model, dataset)
    weights = {prefix + k: v for k, v in net.state_dict().items()}
    em.save({"model": weights, "config": {"model": model, "dataset": dataset}, "epoch": 1}, str(path))
    return net.eval()


@pytest.mark.parametrize("prefix", ["", "module."])
def test_export_takes_the_model_from_the_checkpoint_and_writes_beside_it(tmp_path, capsys, prefix):
    net = _train_checkpoint(tmp_path / "checkpoint.safetensors", "resnet20", "mnist_sample", prefix)
    assert main(["export", str(tmp_path / "checkpoint.safetensors"), "--dynamic-batch"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {tmp_path / 'checkpoint.onnx'}: resnet20," in printed and "inputs input[batch, 1, 28, 28]" in printed
    x = em.randn(3, 1, 28, 28)
    with em.no_grad():
        want = net(x).numpy()
    close(ort_session(tmp_path / "checkpoint.onnx").run(["output"], {"input": x.numpy()})[0], want)


def test_a_wrong_model_is_one_line_naming_the_checkpoints(tmp_path, capsys):
    _train_checkpoint(tmp_path / "ckpt.safetensors", "lenet5", "mnist_sample")
    assert main(["export", str(tmp_path / "ckpt.safetensors"), "--model", "resnet20"]) == 2
    err = capsys.readouterr().err
    assert err == (f"ember export: error: --model resnet20: {tmp_path / 'ckpt.safetensors'} holds lenet5 (trained by "
                   "ember train on mnist_sample), not resnet20; leave --model out to export it\n")
    assert not (tmp_path / "ckpt.onnx").exists()
    # A plain state dict names no model: its weights say which zoo model they fit.
    em.save(em.models.get_model("lenet5").state_dict(), str(tmp_path / "w.safetensors"))
    for argv, words in [
        ([], "--model: {w} holds weights but names no model, as an `ember train` checkpoint does; pass --model NAME "
             "(its weights are those of lenet5)"),
        (["--model", "resnet20"], "--model resnet20: {w} holds the weights of lenet5, not of resnet20; pass --model "
                                  "lenet5"),
        (["--model", "lenet5", "--num-classes", "7"], "--model lenet5: the weights in {w} don't fit lenet5: size "
                                                      "mismatch for classifier.4.weight"),
    ]:
        assert main(["export", str(tmp_path / "w.safetensors"), *argv]) == 2
        err = capsys.readouterr().err
        assert words.format(w=tmp_path / "w.safetensors") in err and err.count("\n") == 1, err
    em.save(em.nn.Linear(3, 2).state_dict(), str(tmp_path / "linear.safetensors"))  # no zoo model's weights
    assert main(["export", "--model", "mlp", "--out", str(tmp_path / "m.onnx"), str(tmp_path / "linear.safetensors")]) == 2
    err = capsys.readouterr().err
    assert (f"--model mlp: the weights in {tmp_path / 'linear.safetensors'} don't fit mlp: 6 of its 6 tensors are "
            "missing (first: layers.0.weight) and 2 are not its own (first: weight)") in err and err.count("\n") == 1, err


@pytest.mark.parametrize("argv, words", [
    ([], "nothing to export: give a checkpoint (ember export runs/x/checkpoint.safetensors) or a model"),
    (["--model", "mlp"], "--out FILE is needed without a checkpoint"),
    (["{tmp}/nope.safetensors"], "{tmp}/nope.safetensors: no such file"),
    (["{tmp}"], "{tmp}: is a folder; give the checkpoint file"),
])
def test_missing_checkpoint_or_out(tmp_path, capsys, argv, words):
    assert main(["export", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert words.format(tmp=tmp_path) in err and err.count("\n") == 1, err
