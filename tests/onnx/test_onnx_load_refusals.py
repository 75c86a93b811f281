"""ember.onnx.load refuses what onnxruntime refuses (empty and non-model files, unsupported opsets, inputs of
the wrong shape or dtype, initialisers that do not match their dims), never hangs on a FIFO or reads a device
forever, and runs models of old opsets with the meaning they had."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember as em  # noqa: E402
from ember.errors import ShapeError  # noqa: E402


def _model(nodes=None, inputs=(("x", TensorProto.FLOAT, [2, 4]),), initializers=(), opset=17, outputs=("y",)):
    """A small model (by default y = x + w, w an initializer of four ones) as bytes."""
    if nodes is None:
        nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
        initializers = initializers or [numpy_helper.from_array(np.ones(4, np.float32), "w")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8)
    return model.SerializeToString()


def _ort(data, feeds=None):
    """onnxruntime's outputs for `feeds` (raises what onnxruntime raises)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4  # onnxruntime's warnings about old opsets are expected here
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds) if feeds is not None else None


_X = np.arange(8, dtype=np.float32).reshape(2, 4)


# --- files ---------------------------------------------------------------------------------------------
_LOAD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # an endless read fails here, not on the machine
    import ember as em
    try:
        em.onnx.load(sys.argv[1])
    except ValueError as e:
        print(e)
""")


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path, kind):
    path = tmp_path / "model.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(path)], capture_output=True, text=True, timeout=120)
    want = "is a named pipe (FIFO)" if kind == "fifo" else "is a device"
    assert f"ember.onnx.load: {path}: {want}, not an ONNX model file" in proc.stdout, proc.stderr[-2000:]


def test_a_folder_a_missing_file_and_a_loop_of_links(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: is a folder, not an ONNX model file"):
        em.onnx.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such ONNX model file: .*missing.onnx"):
        em.onnx.load(tmp_path / "missing.onnx")
    loop = tmp_path / "loop.onnx"
    os.symlink(loop, loop)
    with pytest.raises(ValueError, match="loop.onnx: can't be opened: Too many levels of symbolic links"):
        em.onnx.load(loop)


@pytest.mark.parametrize("data, match", [
    (b"", r"empty \(0 bytes\), not an ONNX model"),
    (b"\x89PNG\r\n\x1a\n" + bytes(40), "is not an ONNX model"),
    (b"\x08\x07", "is not an ONNX model: it has no graph"),  # a valid ModelProto (ir_version 7) without a graph
])
def test_an_empty_or_foreign_file_is_named(tmp_path, data, match):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(Exception):  # noqa: B017  (onnxruntime refuses it too, with its own error type)
        _ort(data)
    with pytest.raises(ValueError, match=match) as info:
        em.onnx.load(path)
    assert str(path) in str(info.value)


# --- opsets --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [999, onnx.defs.onnx_opset_version() + 1, 6, 1])
def test_an_unsupported_opset_is_refused_with_the_supported_range(opset):
    data = _model(opset=opset)
    with pytest.raises(Exception):  # noqa: B017
        _ort(data, {"x": _X})
    newest = onnx.defs.onnx_opset_version()
    with pytest.raises(ValueError, match=rf"<bytes> uses opset {opset}; Ember loads opsets 7 to {newest}"):
        em.onnx.load(data)


@pytest.mark.parametrize("opset, node", [
    (11, helper.make_node("Softmax", ["x"], ["y"], axis=1)),  # before 13: over the flattened trailing axes
    (12, helper.make_node("LogSoftmax", ["x"], ["y"])),
    (7, helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.5)),  # before 11: bounds as attributes
    (10, helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 0, 0, 1], value=2.0)),
    (9, helper.make_node("Slice", ["x"], ["y"], starts=[1], ends=[3], axes=[2])),  # before 10: attributes
    (13, helper.make_node("Clip", ["x"], ["y"])),  # no bounds at all
], ids=["Softmax-11", "LogSoftmax-12", "Clip-7", "Pad-10", "Slice-9", "Clip-13-unbounded"])
def test_old_opsets_run_with_the_meaning_they_had(opset, node):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    data = _model([node], inputs=[("x", TensorProto.FLOAT, [2, 3, 4])], opset=opset)
    want = _ort(data, {"x": x})[0]
    np.testing.assert_allclose(em.onnx.load(data)(x).numpy(), want, rtol=1e-5, atol=1e-6)


# --- inputs --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dims, given, error, match", [
    ([2, 4], (3, 7), ShapeError, r"input 'x' has shape \(3, 7\) but the model declares \(2, 4\): dimension 0 "
                                 r"is 3, expected 2; dimension 1 is 7, expected 4"),
    ([2, 4], (2, 4, 1), ShapeError, r"input 'x' has shape \(2, 4, 1\) but the model declares \(2, 4\): 3 "
                                    r"dimensions, expected 2"),
    (["batch", 4], (3, 5), ShapeError, r"declares \(batch, 4\): dimension 1 is 5, expected 4"),
])
def test_an_input_that_does_not_fit_the_declared_shape_is_refused(dims, given, error, match):
    data = _model(inputs=[("x", TensorProto.FLOAT, dims)])
    x = np.ones(given, np.float32)
    with pytest.raises(Exception, match="dimensions|rank"):
        _ort(data, {"x": x})
    with pytest.raises(error, match=match):
        em.onnx.load(data)(x)
    with pytest.raises(error, match=match):
        em.onnx.load(data, jit=True)(x=em.from_numpy(x))


@pytest.mark.parametrize("dims", [["batch", 4], [None, 4], None])
def test_symbolic_and_unset_dims_accept_any_size(dims):
    data = _model(inputs=[("x", TensorProto.FLOAT, dims)])
    for rows in (1, 3):
        x = np.ones((rows, 4), np.float32)
        want = _ort(data, {"x": x})[0]
        np.testing.assert_array_equal(em.onnx.load(data)(x).numpy(), want)


@pytest.mark.parametrize("given", [np.int64, np.float64, np.float16, np.bool_])
def test_an_input_of_another_dtype_is_refused(given):
    data = _model()
    x = np.ones((2, 4), given)
    with pytest.raises(Exception, match="Unexpected input data type"):
        _ort(data, {"x": x})
    name = np.dtype(given).name
    with pytest.raises(TypeError, match=f"input 'x' is {name} but the model declares float32"):
        em.onnx.load(data)(x)
    with pytest.raises(TypeError, match=f"input 'x' is {name} but the model declares float32"):
        em.onnx.load(data).run({"x": em.from_numpy(x)})


def test_python_numbers_take_the_declared_dtype_when_only_their_width_changes():
    program = em.onnx.load(_model())
    y = program([[0, 1, 2, 3], [4, 5, 6, 7.5]])
    assert y.dtype == em.float32 and y.numpy()[1, 3] == 8.5
    data = _model([helper.make_node("Identity", ["i"], ["y"])], inputs=[("i", TensorProto.INT64, [2])])
    with pytest.raises(TypeError, match="input 'i' is float64 but the model declares int64"):
        em.onnx.load(data)([1.5, 2.0])


# --- initializers --------------------------------------------------------------------------------------
def _tensor(dims, data_type=TensorProto.FLOAT, floats=None, raw=None, name="w"):
    t = TensorProto()
    t.name, t.data_type = name, data_type
    t.dims.extend(dims)
    if floats is not None:
        t.float_data.extend(floats)
    if raw is not None:
        t.raw_data = raw
    return t


@pytest.mark.parametrize("tensor, match", [
    (_tensor([4], floats=[1, 2, 3]), r"initializer 'w' has dims \[4\] \(4 elements\)"),
    (_tensor([4], raw=np.ones(3, np.float32).tobytes()), r"initializer 'w' has dims \[4\] \(4 elements\)"),
    (_tensor([-1], raw=np.ones(4, np.float32).tobytes()), r"initializer 'w' has negative dims \[-1\]"),
    (_tensor([2**40, 2**40], raw=np.ones(4, np.float32).tobytes()), r"initializer 'w' has dims \[1099511627776"),
    (_tensor([4], data_type=999, raw=bytes(16)), "initializer 'w' has dims .* data type 999"),
])
def test_an_initializer_whose_dims_do_not_match_its_data_is_named(tensor, match):
    data = _model(initializers=[tensor])
    with pytest.raises(Exception):  # noqa: B017
        _ort(data, {"x": _X})
    with pytest.raises(ValueError, match=match):
        em.onnx.load(data)


def test_a_constant_whose_dims_do_not_match_its_data_is_named():
    node = helper.make_node("Constant", [], ["w"], name="c", value=_tensor([4], floats=[1, 2, 3], name="v"))
    data = _model([node, helper.make_node("Add", ["x", "w"], ["y"])])
    with pytest.raises(Exception):  # noqa: B017
        _ort(data, {"x": _X})
    with pytest.raises(ValueError, match=r"node 'c' \(Constant\) attribute 'value' has dims \[4\]"):
        em.onnx.load(data)
