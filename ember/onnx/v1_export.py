"""`export_session`: the part of an ember.v1 graph that a Session's fetches need, written as ONNX, with the
session's variable values as initializers and the listed placeholders as the model's inputs."""

from __future__ import annotations

from ember.graph.ir import PLACEHOLDER, VARIABLE
from ember.onnx._deps import require_onnx
from ember.onnx.export import DEFAULT_OPSET, check_opset, reachable, save, to_onnx
from ember.onnx.trace import Traced


def _value(sess, x, what: str):
    from ember.dispatch import is_symbolic
    from ember.tensor import Tensor

    if isinstance(x, str):
        x = sess.graph.get_tensor_by_name(x if ":" in x else x + ":0")
    if not isinstance(x, Tensor) or not is_symbolic(x) or x._data.node.graph is not sess.graph:
        raise TypeError(f"ember.onnx.export_session: each of {what} must be a tensor of the session's graph "
                        f"(or its name), got {x!r}")
    return x._data


def _default_name(v, i: int, kind: str) -> str:
    if v.node.name:
        return v.node.name if v.index == 0 and kind == "input" else f"{v.node.name}:{v.index}"
    return f"{kind}_{i}"


def export_session(session, inputs, outputs, path=None, input_names=None, output_names=None, dynamic_axes=None,
                   opset_version: int = DEFAULT_OPSET):
    """Export what `session.run(outputs, {inputs: ...})` computes as an ONNX model; returns the ModelProto.

    `inputs` are the graph's placeholders the model takes (unknown sizes become named dimensions,
    `<input>_dim<k>` unless `dynamic_axes` names them); `outputs` are the fetched tensors. Variables are
    read from the session, so run their initializers (or restore a checkpoint) first.
    """
    onnx = require_onnx()
    check_opset(onnx, opset_version, "ember.onnx.export_session")
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    ins = [_value(session, x, "inputs") for x in inputs]
    outs = [_value(session, x, "outputs") for x in outputs]
    for v in ins:
        if v.node.kind != PLACEHOLDER:
            raise TypeError(f"ember.onnx.export_session: input {v.node.name!r} is not a placeholder")
    fed = {v.node.id for v in ins}
    variables = {}
    for node in reachable(outs):
        if node.kind == PLACEHOLDER and node.id not in fed:
            raise ValueError(f"ember.onnx.export_session: the outputs need placeholder {node.name!r}, which is not "
                             "among the inputs")
        var = node.attrs.get("variable") if node.kind == VARIABLE or (
            node.kind == "op" and node.op.name == "read_variable") else None
        if var is not None and session.variable_values.has(var):
            variables[var] = session.variable_values.read(var)
    input_names = list(input_names) if input_names is not None else [_default_name(v, i, "input")
                                                                        for i, v in enumerate(ins)]
    output_names = list(output_names) if output_names is not None else [_default_name(v, i, "output")
                                                                          for i, v in enumerate(outs)]
    traced = Traced(session.graph, ins, outs, {}, {}, variables)
    proto = to_onnx(traced, input_names, output_names, dynamic_axes, opset_version)
    save(onnx, proto, path)
    return proto
