"""`ember.onnx.export`: trace a model or function into the graph IR, fold what depends only on weights,
and write each remaining node through the op table (ops_to_onnx.py) as an ONNX model."""

from __future__ import annotations

import os

import numpy as np

from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, Value
from ember.graph.passes.rewrite import is_stateful
from ember.onnx._deps import require_onnx
from ember.onnx.context import ExportContext
from ember.onnx.ops_to_onnx import TO_ONNX
from ember.onnx.trace import Traced, as_args, symbols_of, trace
from ember.symbolic import SymInt, has_symbols

DEFAULT_OPSET = 18
MIN_OPSET = 17  # LayerNormalization
_NO_FOLD = frozenset({"host_random", "random_normal", "random_uniform", "random_integers", "truncated_normal"})


def export(model, example_args, path=None, input_names=None, output_names=None, dynamic_axes=None,
           opset_version: int = DEFAULT_OPSET, do_constant_folding: bool = True):
    """Export `model(*example_args)` (an nn.Module or a function of tensors) to ONNX; returns the ModelProto.

    Traced in eval mode without autograd; parameters and buffers become initializers named as in
    `named_parameters()`. `dynamic_axes` as in torch.onnx.export (`{"input": {0: "batch"}}`) keeps
    those sizes symbolic. `path` (a file name or a writable binary file), when given, receives the model.
    """
    onnx = require_onnx()
    check_opset(onnx, opset_version, "ember.onnx.export")
    if type(model).__name__ == "Session" and type(model).__module__.startswith("ember.v1"):
        raise TypeError("ember.onnx.export: for an ember.v1 Session use ember.onnx.export_session(session, inputs, "
                        "outputs, path)")
    args = as_args(example_args)
    input_names = _names("input", input_names, len(args))
    axes, symbols = symbols_of(dynamic_axes, input_names, args)
    traced = trace(model, args, axes, symbols, input_names)
    proto = to_onnx(traced, input_names, output_names, dynamic_axes, opset_version, do_constant_folding)
    save(onnx, proto, path)
    return proto


def save(onnx, proto, path) -> None:
    """Write `proto` to `path` (a file name, or a binary file object); nothing when path is None."""
    if path is None:
        return
    if isinstance(path, (str, os.PathLike)):
        onnx.save_model(proto, os.fspath(path))
    else:
        path.write(proto.SerializeToString())


def check_opset(onnx, opset, where: str) -> None:
    """A ValueError unless `opset` is between MIN_OPSET and the newest the installed onnx knows."""
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or isinstance(opset, bool) or not MIN_OPSET <= opset <= newest:
        raise ValueError(f"{where}: opset_version must be an int from {MIN_OPSET} to {newest} (the newest this onnx "
                         f"{onnx.__version__} knows), got {opset!r}")


def _names(kind: str, names, n: int) -> list:
    names = list(names) if names is not None else []
    if len(names) > n:
        raise ValueError(f"ember.onnx.export: {len(names)} {kind}_names for {n} {kind}s")
    if len(set(names)) != len(names):
        raise ValueError(f"ember.onnx.export: {kind}_names must be distinct, got {names}")
    return names + [f"{kind}_{i}" if f"{kind}_{i}" not in names else f"{kind}_{i}_" for i in range(len(names), n)]


def _host(tensor) -> np.ndarray:
    return np.asarray(tensor._device.backend.to_host(tensor._data))


def reachable(outputs) -> list:
    """The nodes the outputs read through data edges (not control dependencies), in graph order."""
    seen, stack = {}, [v.node for v in outputs]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        stack.extend(x.node for x in n.inputs if isinstance(x, Value))
    return sorted(seen.values(), key=lambda n: n.id)


def fold(traced: Traced, enabled: bool = True) -> dict:
    """Values computable at export time (weights and whatever depends only on them) -> their arrays."""
    known: dict = {}
    for node in reachable(traced.outputs):
        if node.kind == CAPTURE:
            known[node.outputs[0]] = _host(node.attrs["tensor"])
        elif node.kind == CONSTANT:
            known[node.outputs[0]] = np.asarray(node.attrs["value"])
        elif node.kind == VARIABLE or (node.kind == "op" and node.op.name == "read_variable"):
            var = node.attrs["variable"]
            if var not in traced.variables:
                raise ValueError(f"ember.onnx.export: variable {getattr(var, 'op_name', var)!r} has no value; run "
                                 "its initializer in the session first")
            known[node.outputs[0]] = np.asarray(traced.variables[var])
        elif enabled and node.kind == "op" and _foldable(node, known):
            args = [known[x] if isinstance(x, Value) else x for x in node.inputs]
            try:
                with np.errstate(all="ignore"):
                    out = node.op.kernel(np, *args, **node.attrs)
            except Exception:  # noqa: BLE001 - then it is exported as an op and runs in ONNX
                continue
            outs = out if len(node.outputs) > 1 else (out,)
            for v, o in zip(node.outputs, outs):
                known[v] = np.asarray(o).astype(v.dtype, copy=False)
    return known


def _foldable(node, known) -> bool:
    if is_stateful(node) or node.op.name in _NO_FOLD or node.control_inputs:
        return False
    if has_symbols(node.inputs) or has_symbols(node.attrs):
        return False
    values = [x for x in node.inputs if isinstance(x, Value)]
    return bool(values) and all(x in known for x in values)


def _needed(traced: Traced, known: dict) -> list:
    """The op nodes the outputs need, not counting what folding already computed."""
    need, stack = set(), [v for v in traced.outputs if v not in known]
    while stack:
        v = stack.pop()
        n = v.node
        if n.id in need:
            continue
        need.add(n.id)
        stack.extend(x for x in n.inputs if isinstance(x, Value) and x not in known)
    return [n for n in traced.graph.nodes if n.id in need and n.kind == "op"]


def _dims(shape) -> list:
    """ONNX dims: ints, symbol names for symbolic sizes, None for sizes computed from several."""
    dims = []
    for d in shape:
        if type(d) is SymInt:
            dims.append(d.expr if isinstance(d.expr, str) else None)
        else:
            dims.append(d)
    return dims


def to_onnx(traced: Traced, input_names, output_names, dynamic_axes, opset: int, do_constant_folding=True):
    """The ONNX ModelProto of a traced graph."""
    onnx = require_onnx()
    helper = onnx.helper
    ctx = ExportContext(onnx, opset, {})
    output_names = _names("output", output_names, len(traced.outputs))
    for name in list(input_names) + output_names:  # before any generated name can take them
        ctx.reserve(name)
    for v, name in zip(traced.inputs, input_names):
        ctx.names[v] = name
    ctx.symbols = {s: (input_names[pos], axis) for s, (pos, axis) in traced.symbols.items()}
    known = fold(traced, do_constant_folding)
    ctx.known = known
    for node in reachable(traced.outputs):
        if node.kind == CAPTURE:
            name = traced.tensor_names.get(id(node.attrs["tensor"]))
        elif node.kind == VARIABLE or (node.kind == "op" and node.op.name == "read_variable"):
            name = getattr(node.attrs["variable"], "op_name", None)
        else:
            continue
        if name:
            ctx.tensor_names[node.outputs[0]] = name
    nodes = _needed(traced, known)
    for node in nodes:
        _emit(ctx, node)
    graph_outputs = _outputs(ctx, traced, output_names, dynamic_axes or {})
    graph_inputs = []
    for v, name in zip(traced.inputs, input_names):
        if v.node.kind != PLACEHOLDER:
            raise AssertionError("an input is not a placeholder")
        dims = _dims(v.shape)
        for axis, dim_name in _output_axes((dynamic_axes or {}).get(name), name, len(dims)).items():
            dims[axis] = dim_name
        dims = [f"{name}_dim{k}" if d is None else d for k, d in enumerate(dims)]
        graph_inputs.append(helper.make_tensor_value_info(name, ctx.dtype_code(v.dtype), dims))
    graph = helper.make_graph(ctx.nodes, traced.graph.name, graph_inputs, graph_outputs, ctx.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="ember",
                              producer_version=_version())
    model.ir_version = min(model.ir_version, _ir_version_for(onnx, opset))
    return model


def _version() -> str:
    from ember.version import __version__

    return __version__


def _ir_version_for(onnx, opset: int) -> int:
    """The IR version released with `opset` (runtimes reject newer IR versions than they know)."""
    for entry in onnx.helper.VERSION_TABLE:
        _, ir, ai_onnx = entry[0], entry[1], entry[2]
        if ai_onnx == opset:
            return ir
    return onnx.IR_VERSION


def _emit(ctx: ExportContext, node) -> None:
    fn = TO_ONNX.get(node.op.name)
    if fn is None and node.op.name in _NO_FOLD:
        raise NotImplementedError(f"ember.onnx.export: no ONNX mapping for op '{node.op.name}' (node %{node.id}): "
                                  "random draws (dropout in training mode, randn, ember.v1's tf.nn.dropout) do not export; "
                                  "export in eval mode, or fetch a tower built without them")
    if fn is None:
        ins = ", ".join(v.spec_str() if isinstance(v, Value) else repr(v) for v in node.inputs[:3])
        raise NotImplementedError(f"ember.onnx.export: no ONNX mapping for op '{node.op.name}' "
                                  f"(node %{node.id}, inputs {ins}); see docs/onnx.md for the ops that export")
    for x in node.inputs:
        if isinstance(x, Value) and x in ctx.known and x not in ctx.names:
            ctx.value(x)
    ctx.node = node
    outs = fn(ctx, node)
    ctx.node = None
    outs = outs if isinstance(outs, list) else [outs]
    for v, name in zip(node.outputs, outs):
        if name is not None:
            ctx.names[v] = name


def _outputs(ctx: ExportContext, traced: Traced, output_names: list, dynamic_axes: dict) -> list:
    helper = ctx.helper
    produced = {o: node for node in ctx.nodes for o in node.output}
    taken: set = set()
    infos = []
    for v, name in zip(traced.outputs, output_names):
        src = ctx.value(v) if v in ctx.known or v in ctx.names else None
        if src is None:
            raise _missing(v)
        if src in produced and src not in taken and src not in output_names:
            _rename(ctx, src, name)
            ctx.names[v] = name
        else:  # an input, an initializer or a value already given to another output
            ctx.reserve(name)
            ctx.nodes.append(helper.make_node("Identity", [src], [name], name=ctx.fresh(f"{name}_identity")))
        taken.add(name)
        dims = _dims(v.shape)
        for axis, dim_name in _output_axes(dynamic_axes.get(name), name, len(dims)).items():
            dims[axis] = dim_name
        infos.append(helper.make_tensor_value_info(name, ctx.dtype_code(v.dtype), dims))
    return infos


def _output_axes(spec, name: str, nd: int) -> dict:
    if not spec:
        return {}
    items = spec.items() if isinstance(spec, dict) else ((a, f"{name}_dynamic_axes_{k + 1}") for k, a in enumerate(spec))
    return {a % nd: str(n) for a, n in items}


def _rename(ctx: ExportContext, old: str, new: str) -> None:
    ctx.reserve(new)
    for n in ctx.nodes:
        for i, x in enumerate(n.input):
            if x == old:
                n.input[i] = new
        for i, x in enumerate(n.output):
            if x == old:
                n.output[i] = new
    for v, nm in list(ctx.names.items()):
        if nm == old:
            ctx.names[v] = new


def _missing(v: Value):
    n = v.node
    return NotImplementedError(f"ember.onnx.export: output {n.outputs.index(v)} of op '{n.op_name}' (node %{n.id}) "
                               "has no ONNX form")
