"""ember.onnx.load runs ONNX models with Ember ops: Ember's own exports round-trip, and models exported by
PyTorch's TorchScript-based exporter (torch.onnx.export(..., dynamo=False)) match PyTorch."""

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_test_helpers import close  # noqa: E402

import ember as em  # noqa: E402
from ember.models import get_model  # noqa: E402

_ROUND_TRIP = {
    "mlp": lambda b: (em.randn(b, 1, 28, 28),),
    "lenet5": lambda b: (em.randn(b, 1, 28, 28),),
    "resnet20": lambda b: (em.randn(b, 3, 32, 32),),
    "transformer_lm": lambda b: (em.randint(0, 65, (b, 16)),),
    "lstm_classifier": lambda b: (em.randint(0, 1000, (b, 12)),),
    "ncf": lambda b: (em.randint(0, 900, (b,)), em.randint(0, 900, (b,))),
}


@pytest.mark.parametrize("name", sorted(_ROUND_TRIP))
@pytest.mark.parametrize("jit", [False, True])
def test_round_trip_runs_without_the_python_model(name, jit, tmp_path):
    em.manual_seed(1)
    model = get_model(name)
    model.eval()
    make = _ROUND_TRIP[name]
    args = make(2)
    names = [f"x{i}" for i in range(len(args))]
    em.onnx.export(model, args, tmp_path / "m.onnx", input_names=names, dynamic_axes={n: {0: "b"} for n in names})
    program = em.onnx.load(tmp_path / "m.onnx", jit=jit)
    assert program.input_names == names
    for b in (3, 2):
        inputs = make(b)
        with em.no_grad():
            want = model(*inputs)
        got = program(*inputs)
        close(got.numpy(), want.numpy(), rtol=1e-5)


def test_inputs_by_name_and_gradients_flow(tmp_path):
    model = em.nn.Sequential(em.nn.Linear(4, 3), em.nn.Tanh())
    em.onnx.export(model, em.randn(2, 4), tmp_path / "m.onnx", input_names=["x"], output_names=["y"])
    program = em.onnx.load(str(tmp_path / "m.onnx"))
    x = em.randn(2, 4, requires_grad=True)
    y = program.run({"x": x})["y"]
    y.sum().backward()
    x2 = x.detach().requires_grad_(True)
    model(x2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="missing input"):
        program()
    with pytest.raises(TypeError, match="no input 'z'"):
        program(z=x)


def test_unsupported_onnx_op_names_type_and_node():
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="nms_1")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
                                            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])],
                              [helper.make_tensor_value_info("sel", TensorProto.INT64, [None, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(NotImplementedError, match=r"ONNX op 'NonMaxSuppression' \(node 'nms_1'\)"):
        em.onnx.load(model.SerializeToString())


# --- models exported by PyTorch ------------------------------------------------------------------
torch = pytest.importorskip("torch")


def _torch_export(net, args, path, **kw):
    """PyTorch's TorchScript-based exporter (dynamo=False), the one that needs no onnxscript."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, str(path), dynamo=False, **kw)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)


class _TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False)
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.conv1d = torch.nn.Conv1d(4, 6, 3, padding=1)
        self.fc = torch.nn.Linear(6, 10)

    def forward(self, x):
        x = torch.nn.functional.relu6(self.bn(self.conv1(x)))
        x = torch.nn.functional.max_pool2d(torch.nn.functional.pad(x, (1, 0, 1, 0)), 2, ceil_mode=True)
        x = torch.nn.functional.avg_pool2d(torch.nn.functional.leaky_relu(self.conv2(x), 0.1), 2, stride=1, padding=1)
        x = self.up(x)
        x = torch.sigmoid(self.conv1d(x.flatten(2)))
        x = torch.nn.functional.adaptive_avg_pool1d(x, 1).squeeze(-1)
        return torch.log_softmax(self.fc(x), dim=-1), x.argmax(-1)


class _TorchEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 32)
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, t):
        h = self.layer(self.emb(t))
        b = h.size(0)
        return self.head(h.mean(1)), h[:, 1:3].permute(0, 2, 1).contiguous().view(b, -1)


class _TorchRecurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(40, 8)
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = torch.nn.GRU(32, 12)
        self.fc = torch.nn.Linear(12, 3)

    def forward(self, t):
        y, (h, c) = self.lstm(self.emb(t))
        z, hz = self.gru(y.transpose(0, 1))
        return self.fc(z[-1]), h, c, hz


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", ["cnn", "cnn_unfolded", "encoder", "recurrent"])
def test_model_exported_by_pytorch_runs_and_matches(case, jit, tmp_path):
    torch.manual_seed(0)
    if case.startswith("cnn"):
        net = _TorchCNN().eval()
        with torch.no_grad():
            net.bn.running_mean.uniform_(-1, 1)
            net.bn.running_var.uniform_(0.5, 2)
        make = lambda b: torch.randn(b, 3, 12, 12)  # noqa: E731
    elif case == "encoder":
        net = _TorchEncoder().eval()
        make = lambda b: torch.randint(0, 50, (b, 7))  # noqa: E731
    else:  # ONNX LSTM and GRU nodes (bidirectional, two layers, batch-first and not)
        net = _TorchRecurrent().eval()
        make = lambda b: torch.randint(0, 40, (b, 6))  # noqa: E731
    path = tmp_path / "torch.onnx"
    # unfolded: BatchNormalization stays a node instead of being folded into the convolution
    _torch_export(net, (make(2),), path, input_names=["x"], dynamic_axes={"x": {0: "batch"}}, opset_version=17,
                  do_constant_folding=case != "cnn_unfolded")
    program = em.onnx.load(path, jit=jit)
    for b in (3, 1):
        x = make(b)
        with torch.no_grad():
            want = net(x)
        got = program(x.numpy())
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g.numpy(), w.numpy())


def test_a_file_that_is_not_a_model_is_named(tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"not an onnx file")
    with pytest.raises(ValueError, match="garbage.onnx is not an ONNX model"):
        em.onnx.load(bad)
    with pytest.raises(FileNotFoundError):
        em.onnx.load(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="expected a file name, bytes or an onnx.ModelProto, got int"):
        em.onnx.load(3)
