"""Reading an ONNX model and refusing what onnxruntime refuses: no file, not a model, an opset outside the
supported range, initialisers whose dims do not match their data.

A file is read only if it is a regular file (never a FIFO, which would block, or a device such as
/dev/zero, which would be read until memory runs out), and no further than its size. Models older than
opset 13, whose operators meant other things (Softmax over flattened trailing axes, Clip's bounds as
attributes, ...), are converted to opset 13 by onnx's own version converter, so that the operator
table, written for opset 13 and newer, computes what they meant.
"""

from __future__ import annotations

import os

import numpy as np

from ember import regular_file

OLDEST_OPSET = 7  # as onnxruntime, which runs nothing older
CONVERTED_BELOW = 13  # the operator table's semantics; older models are converted to this opset


def _fail(problem: str) -> ValueError:
    return ValueError(f"ember.onnx.load: {problem}")


def read(onnx, name: str):
    """The ModelProto in the file `name`, with its external data (files beside it) loaded."""
    fh, size = regular_file.open_regular(name, "ONNX model file", _fail, "ember.onnx.load")
    with fh:
        data = fh.read(size)  # no further than the size the open file had
    model = parse(onnx, data, name)
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    if any(uses_external_data(t) for t in model.graph.initializer):
        try:
            load_external_data_for_model(model, os.path.dirname(os.path.abspath(name)))
        except Exception as e:  # noqa: BLE001  (onnx's ValidationError, OSError, ValueError)
            raise _fail(f"{name}: its external data can't be read ({type(e).__name__}: {e})") from None
    return model


def parse(onnx, data: bytes, name: str):
    """The ModelProto in `data` (the contents of `name`), or a ValueError naming it."""
    if not data:
        raise _fail(f"{name} is empty (0 bytes), not an ONNX model")
    try:
        return onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError and kin  # noqa: BLE001
        raise _fail(f"{name} is not an ONNX model ({type(e).__name__}: {e})") from None


def checked(onnx, model, name: str):
    """`model` if Ember can run it as it is, else converted to opset 13; a ValueError for what it can't run."""
    if not model.HasField("graph"):
        raise _fail(f"{name} is not an ONNX model: it has no graph")
    for imp in model.opset_import:
        if imp.domain not in ("", "ai.onnx"):
            raise NotImplementedError(f"ember.onnx.load: operator set domain {imp.domain!r} is not supported "
                                      "(only the default ONNX domain is)")
    opset = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
    newest = onnx.defs.onnx_opset_version()
    supported = (f"Ember loads opsets {OLDEST_OPSET} to {newest} (the newest the installed onnx {onnx.__version__} "
                 f"knows; those older than {CONVERTED_BELOW} are converted to {CONVERTED_BELOW} first)")
    if opset is None:
        raise _fail(f"{name} does not say which opset of the default ONNX domain it uses; {supported}")
    if opset > newest:
        raise _fail(f"{name} uses opset {opset}; {supported}")
    if opset < OLDEST_OPSET:
        raise _fail(f"{name} uses opset {opset}; {supported}. Convert it with "
                    f"onnx.version_converter.convert_version(model, {CONVERTED_BELOW})")
    if opset < CONVERTED_BELOW:
        from onnx import version_converter

        try:
            model = version_converter.convert_version(model, CONVERTED_BELOW)
        except Exception as e:  # noqa: BLE001  (the converter raises RuntimeError, ValueError, its own errors)
            raise _fail(f"{name} uses opset {opset}, and converting it to opset {CONVERTED_BELOW} (whose operators "
                        f"Ember runs) failed: {e}") from None
    return model


def tensor_array(numpy_helper, t, what: str) -> np.ndarray:
    """The NumPy array of the TensorProto `t` (an initializer, a Constant's value), checked against its dims."""
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise _fail(f"{what} has negative dims {dims}")
    try:
        arr = numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError) as e:
        n = int(np.prod(dims, dtype=object))
        raise _fail(f"{what} has dims {dims} ({n} elements) and data type {t.data_type}, which its data does not "
                    f"match ({type(e).__name__}: {e})") from None
    if list(arr.shape) != dims:
        raise _fail(f"{what} has dims {dims} but its data holds {arr.size} elements")
    return arr
