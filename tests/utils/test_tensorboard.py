"""ember.utils.tensorboard.SummaryWriter against torch.utils.tensorboard: the same calls, read back with
TensorBoard's EventAccumulator, give the same tags, steps, values, buckets and images; add_graph's GraphDef."""

import itertools
import os

import numpy as np
import pytest

pytest.importorskip("tensorboard")
torch = pytest.importorskip("torch")
pytest.importorskip("PIL")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch.utils.tensorboard import SummaryWriter as TorchWriter  # noqa: E402

import ember as em  # noqa: E402
from ember import nn  # noqa: E402
from ember.utils.tensorboard import SummaryWriter  # noqa: E402

rng = np.random.RandomState(0)
VALUES = rng.randn(2000).astype(np.float32) * 3
IMG = rng.rand(3, 6, 10).astype(np.float32)
BATCH = rng.rand(5, 3, 4, 7).astype(np.float32)


def _read(path):
    return EventAccumulator(str(path), size_guidance={"tensors": 0, "images": 0, "histograms": 0}).Reload()


def _log(writer_class, log_dir, to_tensor):
    with writer_class(str(log_dir)) as w:
        for step in range(4):
            w.add_scalar("loss", to_tensor(np.float32(1.0 / (step + 1))), step)
        w.add_scalar("plain", 2.5, 7, walltime=123.0)
        w.add_scalars("run/x", {"a": 1.0, "b": to_tensor(np.float32(2.0))}, 3)
        w.add_histogram("tf_bins", to_tensor(VALUES), 1)
        w.add_histogram("auto_bins", to_tensor(VALUES), 2, bins="auto")
        w.add_histogram("ten_bins", to_tensor(VALUES), 3, bins=10, max_bins=4)
        w.add_image("chw", to_tensor(IMG), 1)
        w.add_image("hwc", to_tensor(IMG.transpose(1, 2, 0)), 1, dataformats="HWC")
        w.add_image("hw_uint8", to_tensor((IMG[0] * 255).astype(np.uint8)), 1, dataformats="HW")
        w.add_images("grid", to_tensor(BATCH), 2)
        w.add_text("note", "some *markdown*", 5)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "layers": 3}, {"hp/acc": 0.9}, run_name="hp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tb")
    _log(SummaryWriter, root / "ember", em.tensor)
    _log(TorchWriter, root / "torch", torch.tensor)
    return root / "ember", root / "torch"


def test_same_tags_and_folders(runs):
    ours, theirs = runs
    folders = lambda d: sorted(p for p in os.listdir(d) if not p.startswith("events"))  # noqa: E731
    assert folders(ours) == folders(theirs) == ["hp", "run_x_a", "run_x_b"]
    assert _read(ours).Tags() == _read(theirs).Tags()


def test_scalars(runs):
    a, b = (_read(r) for r in runs)
    for tag in ("loss", "plain"):
        assert [(e.step, e.value) for e in a.Scalars(tag)] == [(e.step, e.value) for e in b.Scalars(tag)]
    assert a.Scalars("plain")[0].wall_time == 123.0
    for sub in ("run_x_a", "run_x_b"):
        sa, sb = _read(runs[0] / sub), _read(runs[1] / sub)
        assert sa.Tags()["scalars"] == sb.Tags()["scalars"] == ["run/x"]
        assert [(e.step, e.value) for e in sa.Scalars("run/x")] == [(e.step, e.value) for e in sb.Scalars("run/x")]


@pytest.mark.parametrize("tag", ["tf_bins", "auto_bins", "ten_bins"])
def test_histograms_have_the_same_buckets(runs, tag):
    (ha,), (hb,) = (_read(r).Histograms(tag) for r in runs)
    assert ha.step == hb.step
    a, b = ha.histogram_value, hb.histogram_value
    assert (a.min, a.max, a.num) == (b.min, b.max, b.num)
    np.testing.assert_allclose([a.sum, a.sum_squares], [b.sum, b.sum_squares], rtol=1e-9)
    np.testing.assert_array_equal(a.bucket_limit, b.bucket_limit)
    np.testing.assert_array_equal(a.bucket, b.bucket)


@pytest.mark.parametrize("tag, size", [("chw", (10, 6)), ("hwc", (10, 6)), ("hw_uint8", (10, 6)), ("grid", (35, 4))])
def test_images_same_size_and_pixels(runs, tag, size):
    (ia,), (ib,) = (_read(r).Images(tag) for r in runs)
    assert (ia.width, ia.height) == (ib.width, ib.height) == size
    import io

    from PIL import Image

    pa, pb = (np.asarray(Image.open(io.BytesIO(i.encoded_image_string))) for i in (ia, ib))
    np.testing.assert_array_equal(pa, pb)


def test_text_and_hparams(runs):
    a, b = (_read(r) for r in runs)
    (ta,), (tb,) = a.Tensors("note/text_summary"), b.Tensors("note/text_summary")
    assert ta.step == tb.step == 5 and ta.tensor_proto.string_val == tb.tensor_proto.string_val == [b"some *markdown*"]
    ha, hb = _read(runs[0] / "hp"), _read(runs[1] / "hp")
    assert ha.PluginTagToContent("hparams") == hb.PluginTagToContent("hparams")
    assert [e.value for e in ha.Scalars("hp/acc")] == [e.value for e in hb.Scalars("hp/acc")] == [pytest.approx(0.9)]


def test_purge_step_and_reopen_after_close(tmp_path, monkeypatch):
    # Event files sort by the second they were made in (then by a counter, as text): a new second per file.
    import types

    from tensorboard.summary.writer import event_file_writer

    clock = itertools.count(1_000_000_000)
    monkeypatch.setattr(event_file_writer, "time", types.SimpleNamespace(time=lambda: next(clock)))
    with SummaryWriter(tmp_path) as w:
        for s in range(10):
            w.add_scalar("x", s, s)
    w.add_scalar("x", 100.0, 10)  # after close: a new file, as PyTorch does
    w.close()
    with SummaryWriter(tmp_path, purge_step=5) as w:
        w.add_scalar("x", -5.0, 5)
    ea = EventAccumulator(str(tmp_path), purge_orphaned_data=True).Reload()
    assert [(e.step, e.value) for e in ea.Scalars("x")] == [(s, float(s)) for s in range(5)] + [(5, -5.0)]


def test_default_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    w.close()
    (run,) = os.listdir(tmp_path / "runs")
    assert run.endswith("_exp") and os.listdir(tmp_path / "runs" / run)[0].startswith("events.out.tfevents.")


def test_filename_suffix_and_flush(tmp_path):
    w = SummaryWriter(tmp_path, filename_suffix=".ember")
    w.add_scalar("a", 1.0, 1)
    w.flush()
    assert [e.value for e in _read(tmp_path).Scalars("a")] == [1.0]
    w.close()
    assert os.listdir(tmp_path)[0].endswith(".ember")


@pytest.mark.parametrize("call, err, words", [
    (lambda w: w.add_scalar("a", em.ones(3), 0), ValueError, "expected one value"),
    (lambda w: w.add_scalar(3, 1.0, 0), TypeError, "tag must be a str"),
    (lambda w: w.add_scalar("a", "x", 0), TypeError, "expected numbers"),
    (lambda w: w.add_scalar("a", 1.0, "step"), TypeError, "global_step"),
    (lambda w: w.add_scalars("a", [1.0]), TypeError, "dict"),
    (lambda w: w.add_histogram("h", em.zeros(0), 0), ValueError, "empty"),
    (lambda w: w.add_image("i", em.ones(3, 4), 0), ValueError, "does not match dataformats 'CHW'"),
    (lambda w: w.add_image("i", em.ones(2, 4, 4), 0), ValueError, "channels"),
    (lambda w: w.add_image("i", em.ones(3, 4, 4), 0, dataformats="CXW"), ValueError, "dataformats"),
    (lambda w: w.add_scalar("a", em.ones(1, device="meta"), 0), ValueError, "meta tensor"),
    (lambda w: w.add_hparams({"a": [1]}, {}), ValueError, "hparam 'a'"),
    (lambda w: w.add_hparams([1], {}), TypeError, "must be dicts"),
    (lambda w: w.add_graph(nn.Linear(2, 3)), ValueError, "input_to_model"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, call, err, words):
    with SummaryWriter(tmp_path) as w, pytest.raises(err, match=words.replace("*", r"\*")):
        call(w)


def test_bfloat16_and_low_precision_values(tmp_path):
    pytest.importorskip("ml_dtypes")
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("bf", em.tensor(0.5, dtype=em.bfloat16), 1)
        w.add_histogram("h16", em.tensor(VALUES[:50], dtype=em.float16), 1)
    ea = _read(tmp_path)
    assert ea.Scalars("bf")[0].value == 0.5 and ea.Histograms("h16")[0].histogram_value.num == 50


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
        self.bn = nn.BatchNorm1d(10)

    def forward(self, x):
        return em.softmax(self.bn(self.head(em.relu(self.conv(x)))), dim=1)


def test_add_graph_writes_a_graph_def_with_scopes_shapes_and_dtypes(tmp_path):
    model = Net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with SummaryWriter(tmp_path) as w:
        w.add_graph(model, em.randn(2, 1, 8, 8))
    graph = _read(tmp_path).Graph()
    nodes = {n.name: n for n in graph.node}
    ops = [n.op for n in graph.node]
    assert {"conv2d", "relu", "linear", "softmax", "Parameter", "IO Node"} <= set(ops)
    conv = nodes["Net/Conv2d[conv]/conv2d"]
    assert list(conv.input) == ["input/arg0", "Net/Conv2d[conv]/weight"]
    assert [d.size for d in conv.attr["_output_shapes"].list.shape[0].dim] == [2, 4, 6, 6]
    assert list(conv.attr["stride"].list.i) == [1, 1] and conv.device == "/device:CPU:0"
    from tensorboard.compat.proto import types_pb2

    assert conv.attr["dtype"].type == types_pb2.DT_FLOAT
    assert nodes["Net/Sequential[head]/Linear[1]/weight"].op == "Parameter"
    assert nodes["Net/BatchNorm1d[bn]/running_mean"].op == "Buffer"
    assert any(n.startswith("Net/Sequential[head]/Flatten[0]/") for n in nodes)
    assert nodes["Net/relu"].input == ["Net/Conv2d[conv]/channel_affine"]
    (out,) = [n for n in graph.node if n.name.startswith("output/")]
    assert nodes[out.input[0]].op == "softmax"
    for n in graph.node:  # every input names a node of the graph
        assert all(i.lstrip("^").split(":")[0] in nodes for i in n.input)
    after = model.state_dict()  # tracing changed nothing (BatchNorm statistics included)
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)


def test_add_graph_of_a_function_and_several_inputs(tmp_path):
    def f(a, b):
        return (a @ b).tanh(), a.sum()

    with SummaryWriter(tmp_path) as w:
        w.add_graph(f, (em.ones(2, 3), np.ones((3, 4), np.float32)))
    graph = _read(tmp_path).Graph()
    assert [n.name for n in graph.node if n.op == "IO Node"] == ["input/arg0", "input/arg1", "output/output.0",
                                                                   "output/output.1"]


def test_v1_file_writer_files_read_by_tensorboard_with_the_graph(tmp_path):
    """ember.v1 keeps its hand-written event files; TensorBoard's reader takes them, graph included."""
    import ember.v1 as tf

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        with tf.name_scope("layer"):
            w = tf.Variable(tf.ones([3, 2]), name="w")
            y = tf.nn.relu(tf.matmul(x, w) + 1.0)
        tf.summary.scalar("mean", tf.reduce_mean(y))
        tf.summary.histogram("act", y)
        merged = tf.summary.merge_all()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            writer = tf.summary.FileWriter(str(tmp_path), sess.graph)
            for i in range(3):
                writer.add_summary(sess.run(merged, {x: np.full((4, 3), float(i))}), i)
            writer.close()
    ea = _read(tmp_path)
    assert [(e.step, e.value) for e in ea.Scalars("mean")] == [(0, 1.0), (1, 4.0), (2, 7.0)]
    assert [h.histogram_value.num for h in ea.Histograms("act")] == [8.0, 8.0, 8.0]
    nodes = {n.name: n for n in ea.Graph().node}
    assert nodes["layer/MatMul"].op == "MatMul" and list(nodes["layer/MatMul"].input) == ["x", "layer/w"]
    assert nodes["layer/Relu"].op == "Relu" and nodes["layer/w"].op == "VariableV2"
    assert [d.size for d in nodes["layer/MatMul"].attr["_output_shapes"].list.shape[0].dim] == [-1, 2]


def test_histogram_raw_and_figure(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    fig, (fig2, fig3) = plt.figure(figsize=(2, 1), dpi=50), (plt.figure(figsize=(2, 1), dpi=50) for _ in range(2))
    for d, W in ((tmp_path / "ours", SummaryWriter), (tmp_path / "torch", TorchWriter)):
        with W(str(d)) as w:
            w.add_histogram_raw("raw", 0.0, 3.0, 4, 6.0, 14.0, [1.0, 2.0, 3.0], [1, 1, 2], global_step=1)
            w.add_figure("fig", fig, 1, close=False)
            w.add_figure("figs", [fig2, fig3], 1, close=False)
    a, b = _read(tmp_path / "ours"), _read(tmp_path / "torch")
    assert a.Histograms("raw")[0].histogram_value == b.Histograms("raw")[0].histogram_value
    for tag, size in (("fig", (100, 50)), ("figs", (200, 50))):
        (ia,), (ib,) = a.Images(tag), b.Images(tag)
        assert (ia.width, ia.height) == (ib.width, ib.height) == size
    plt.close("all")
    with SummaryWriter(tmp_path / "x") as w, pytest.raises(ValueError, match="bucket limits"):
        w.add_histogram_raw("raw", 0, 1, 1, 1, 1, [1.0], [1, 2])


def test_missing_tensorboard_says_how_to_install(monkeypatch):
    import sys

    from ember.utils.tensorboard._deps import require

    monkeypatch.setitem(sys.modules, "tensorboard.summary.writer.event_file_writer", None)
    with pytest.raises(ImportError, match=r'pip install "ember\[tensorboard\]"'):
        require("tensorboard.summary.writer.event_file_writer")


def test_add_graph_of_a_model_jit_cannot_trace_names_the_model(tmp_path):
    class Branchy(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum().item() > 0 else x

    with SummaryWriter(tmp_path) as w, pytest.raises(TypeError, match="add_graph: tracing Branchy failed: item"):
        w.add_graph(Branchy(), em.ones(2))
