"""A TensorBoard `GraphDef` of a model's forward pass, traced into ember.jit's IR.

Each IR node becomes a NodeDef (op name, inputs, device, output shapes and dtype, the op's
attributes); nodes made inside a submodule's forward are named under its scope
(`Net/Linear[fc1]/linear`), so TensorBoard's graph tab folds them into one box per module, as it
shows PyTorch's and TF1's graphs. Parameters are named by their place in the model.
"""

from __future__ import annotations

import numpy as np
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef

from ember import creation
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, Value
from ember.graph.jit import jit

_TF_TYPES = {"bool": "DT_BOOL", "uint8": "DT_UINT8", "int8": "DT_INT8", "int16": "DT_INT16", "int32": "DT_INT32",
             "int64": "DT_INT64", "float16": "DT_HALF", "bfloat16": "DT_BFLOAT16", "float32": "DT_FLOAT",
             "float64": "DT_DOUBLE"}


def _dtype_attr(dtype) -> AttrValue:
    from tensorboard.compat.proto import types_pb2

    return AttrValue(type=types_pb2.DataType.Value(_TF_TYPES.get(np.dtype(dtype).name, "DT_INVALID")))


def _shape(v: Value) -> TensorShapeProto:
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=-1 if d is None else int(d)) for d in v.shape])


def _attr(value) -> AttrValue | None:
    """An op attribute as an AttrValue (None for what has no sensible form, such as arrays)."""
    if isinstance(value, (bool, np.bool_)):
        return AttrValue(b=bool(value))
    if isinstance(value, (int, np.integer)):
        return AttrValue(i=int(value))
    if isinstance(value, (float, np.floating)):
        return AttrValue(f=float(value))
    if isinstance(value, str):
        return AttrValue(s=value.encode())
    if isinstance(value, np.dtype):
        return _dtype_attr(value)
    if isinstance(value, (tuple, list)) and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                                for x in value):
        return AttrValue(list=AttrValue.ListValue(i=[int(x) for x in value]))
    if isinstance(value, (tuple, list)) and all(isinstance(x, (float, np.floating)) for x in value):
        return AttrValue(list=AttrValue.ListValue(f=[float(x) for x in value]))
    if isinstance(value, np.ndarray) or callable(value):
        return None
    return AttrValue(s=repr(value).encode())


class _Scopes:
    """Forward hooks that note where each submodule's forward starts and ends in the graph being traced."""

    def __init__(self, model) -> None:
        self.marks: list = []  # (node count, scope) transitions, in order
        self.outputs = None
        self.handles = []
        self.stack: list = []
        root = type(model).__name__
        for name, m in model.named_modules():
            scope = root if not name else None
            if name:
                parts, mod, path = name.split("."), model, [root]
                for p in parts:
                    mod = getattr(mod, p) if hasattr(mod, p) else mod._modules[p]
                    path.append(f"{type(mod).__name__}[{p}]")
                scope = "/".join(path)
            self.handles.append(m.register_forward_pre_hook(self._enter(scope)))
            self.handles.append(m.register_forward_hook(self._leave(m is model)))

    @staticmethod
    def _count() -> int:
        from ember.dispatch import current_tracer

        tracer = current_tracer()
        return len(tracer.graph.nodes) if tracer is not None else 0

    def _enter(self, scope):
        def hook(module, args):
            self.stack.append(scope)
            self.marks.append((self._count(), scope))
        return hook

    def _leave(self, is_root: bool):
        def hook(module, args, output):
            self.stack.pop()
            self.marks.append((self._count(), self.stack[-1] if self.stack else ""))
            if is_root:
                self.outputs = output
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def scope_of(self, node_id: int) -> str:
        scope = ""
        for count, s in self.marks:
            if count > node_id:
                break
            scope = s
        return scope


def _inputs_tuple(input_to_model) -> tuple:
    if input_to_model is None:
        raise ValueError("SummaryWriter.add_graph: input_to_model is required (Ember traces the model on it)")
    return tuple(input_to_model) if isinstance(input_to_model, (list, tuple)) else (input_to_model,)


def trace(model, input_to_model):
    """(graph, output values, scope of each node id, parameter names by tensor id) of model(*input_to_model)."""
    from ember.graph.jit_key import flatten
    from ember.tensor import Tensor

    args = tuple(creation.as_tensor(a) if isinstance(a, np.ndarray) else a for a in _inputs_tuple(input_to_model))
    is_module = hasattr(model, "named_modules") and hasattr(model, "register_forward_hook")
    scopes = _Scopes(model) if is_module else None
    try:
        graph = jit(model).lower(*args)
    except (TypeError, ValueError, RuntimeError) as e:
        msg = f"SummaryWriter.add_graph: tracing {type(model).__name__} failed: {e}"
        try:
            wrapped = type(e)(msg)
        except Exception:  # noqa: BLE001 - an error class with its own constructor arguments
            wrapped = RuntimeError(msg)
        raise wrapped from e
    finally:
        if scopes is not None:
            scopes.remove()
    outputs = []
    if scopes is not None and scopes.outputs is not None:
        leaves: list = []
        flatten(scopes.outputs, leaves)
        outputs = [t._data for t in leaves if isinstance(t, Tensor) and isinstance(t._data, Value)
                   and t._data.node.graph is graph]
    if not outputs:  # a plain function: the ops nothing else reads
        used = {x.node.id for n in graph.nodes for x in n.value_inputs()}
        outputs = [n.outputs[0] for n in graph.nodes if n.kind == "op" and n.id not in used and n.outputs]
    names = {}
    if is_module:
        for kind, items in (("Parameter", model.named_parameters()), ("Buffer", model.named_buffers())):
            for name, t in items:
                names.setdefault(id(t), (kind, name))
    return graph, outputs, scopes, names


def _param_node_name(model, qualname: str) -> str:
    """'fc1.weight' -> 'Net/Linear[fc1]/weight'."""
    parts = qualname.split(".")
    path, mod = [type(model).__name__], model
    for p in parts[:-1]:
        mod = mod._modules[p]
        path.append(f"{type(mod).__name__}[{p}]")
    return "/".join(path + [parts[-1]])


def _node_def(n, name: str, op: str, names: dict) -> NodeDef:
    """One IR node as a NodeDef: inputs by name, device, output shapes and dtype, the op's attributes."""
    attrs = {}
    if n.kind == "op":
        for k, v in n.attrs.items():
            a = _attr(v)
            if a is not None:
                attrs[k] = a
    inputs = []
    for x in n.inputs:
        if isinstance(x, Value) and x.node.graph is n.graph:
            src = names[x.node.id]
            inputs.append(src if x.index == 0 else f"{src}:{x.index}")
    inputs += [f"^{names[c.id]}" for c in n.control_inputs if c.id in names]
    if n.outputs:
        attrs["_output_shapes"] = AttrValue(list=AttrValue.ListValue(shape=[_shape(v) for v in n.outputs]))
        attrs["dtype"] = _dtype_attr(n.outputs[0].dtype)
    if n.kind == CONSTANT and isinstance(n.attrs.get("value"), np.ndarray) and n.attrs["value"].size == 1:
        attrs["value"] = _attr(n.attrs["value"].reshape(()).item()) or AttrValue()
    device = n.outputs[0].device if n.outputs else None
    dev = f"/device:{device.type.upper()}:{device.index or 0}" if device is not None else ""
    return NodeDef(name=name, op=op, input=inputs, device=dev, attr=attrs)


def v1_graph_def(graph) -> GraphDef:
    """The GraphDef of an ember.v1 graph: TF1's node names and op types, as TensorFlow writes them."""
    from ember.graph.tf_names import type_name

    names = {n.id: n.name or f"{n.op_name}_{n.id}" for n in graph.nodes}
    nodes = [_node_def(n, names[n.id], type_name(n.kind, n.op), names) for n in graph.nodes]
    return GraphDef(node=nodes, versions=VersionDef(producer=22))


def graph_def(model, input_to_model) -> GraphDef:
    """The GraphDef of `model` (an nn.Module or a function of tensors) run on `input_to_model`."""
    graph, outputs, scopes, params = trace(model, input_to_model)
    taken: dict = {}

    def unique(name: str) -> str:
        n = taken.get(name, 0)
        taken[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    names: dict = {}  # node id -> NodeDef name
    nodes = []
    for n in graph.nodes:
        scope = scopes.scope_of(n.id) if scopes is not None else ""
        if n.kind == "op":
            op = n.op.name
            name = f"{scope}/{op}" if scope else op
        elif n.kind == PLACEHOLDER:
            op, name = "IO Node", f"input/{n.name or 'input'}"
        elif n.kind == CAPTURE and id(n.attrs["tensor"]) in params:
            op, qual = params[id(n.attrs["tensor"])]
            name = _param_node_name(model, qual)
        elif n.kind == VARIABLE:
            op, name = "VariableV2", n.name or "Variable"
        else:
            op = "Const"
            name = f"{scope}/{'captured' if n.kind == CAPTURE else 'constant'}" if scope else (
                "captured" if n.kind == CAPTURE else "constant")
        names[n.id] = unique(name)
        nodes.append(_node_def(n, names[n.id], op, names))
    for i, v in enumerate(outputs):
        src = names[v.node.id]
        nodes.append(NodeDef(name=unique(f"output/output.{i}"), op="IO Node",
                             input=[src if v.index == 0 else f"{src}:{v.index}"],
                             attr={"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=[_shape(v)])),
                                   "dtype": _dtype_attr(v.dtype)}))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))
