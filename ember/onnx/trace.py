"""Tracing for export: a model or function run once on symbolic tensors, giving the graph IR, the
placeholder per input (dynamic axes as symbolic sizes) and the output values."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field

import numpy as np

from ember.autograd.grad_mode import no_grad
from ember.backends.meta import MetaArray
from ember.device import as_device
from ember.dispatch import is_symbolic
from ember.graph.ir import Graph, Value
from ember.graph.passes import optimize
from ember.graph.trace import Tracer
from ember.symbolic import SymInt, bind, collecting_guards
from ember.tensor import Tensor


@dataclass
class Traced:
    """What export needs from a trace: the graph, its inputs and outputs, and names for captured tensors."""

    graph: Graph
    inputs: list  # placeholder Value per input, in order
    outputs: list  # output Values, in order
    tensor_names: dict = field(default_factory=dict)  # id(tensor) -> parameter/buffer name
    symbols: dict = field(default_factory=dict)  # symbol name -> (input position, axis)
    variables: dict = field(default_factory=dict)  # ember.v1: variable node -> its value (an array)


def as_args(example_args) -> tuple:
    """example_args as a tuple of tensors (one tensor or array is one argument)."""
    if isinstance(example_args, (Tensor, np.ndarray)):
        example_args = (example_args,)
    if not isinstance(example_args, (tuple, list)) or not example_args:
        raise TypeError("ember.onnx.export: example_args must be a tensor or a non-empty tuple of tensors, "
                        f"got {type(example_args).__name__}")
    out = []
    for i, a in enumerate(example_args):
        if isinstance(a, np.ndarray):
            from ember.creation import tensor

            a = tensor(a)
        if not isinstance(a, Tensor):
            raise TypeError(f"ember.onnx.export: example argument {i} must be a tensor, got {type(a).__name__} "
                            "(bind other arguments with functools.partial or a lambda)")
        out.append(a)
    return tuple(out)


def symbols_of(dynamic_axes, input_names, args) -> tuple[dict, dict]:
    """PyTorch-style dynamic_axes -> ({(input position, axis): symbol name}, {name: (position, axis)}).

    `{"input": {0: "batch"}}` names the symbol; `{"input": [0]}` gets a generated one. Keys naming outputs
    are accepted and only name the output's dimensions.
    """
    axes, symbols = {}, {}
    for key, spec in (dynamic_axes or {}).items():
        if key not in input_names:
            continue
        pos = input_names.index(key)
        nd = args[pos].ndim
        items = spec.items() if isinstance(spec, dict) else ((a, f"{key}_dynamic_axes_{k + 1}") for k, a in
                                                                enumerate(spec))
        for axis, name in items:
            if not isinstance(axis, int) or not -nd <= axis < nd:
                raise ValueError(f"ember.onnx.export: dynamic axis {axis!r} of input {key!r} is out of range for "
                                 f"its {nd} dimensions")
            axis %= nd
            axes[(pos, axis)] = str(name)
            symbols.setdefault(str(name), (pos, axis))
    return axes, symbols


@contextlib.contextmanager
def _eval_mode(model):
    """The model in eval mode while it is traced (as torch.onnx.export does), then its modes back."""
    modules = list(model.modules()) if hasattr(model, "modules") else []
    modes = [m.training for m in modules]
    for m in modules:
        m.training = False
    try:
        yield
    finally:
        for m, t in zip(modules, modes):
            m.training = t


def _names(model) -> dict:
    names: dict = {}
    if hasattr(model, "named_parameters"):
        for n, p in model.named_parameters():
            names.setdefault(id(p), n)
        for n, b in model.named_buffers():
            names.setdefault(id(b), n)
    return names


def _flatten(out, leaves: list) -> None:
    if isinstance(out, Tensor):
        leaves.append(out)
    elif isinstance(out, (tuple, list)):
        for o in out:
            _flatten(o, leaves)
    elif isinstance(out, dict):
        for k in out:
            _flatten(out[k], leaves)
    else:
        raise TypeError(f"ember.onnx.export: the model returned a {type(out).__name__}; only tensors and "
                        "(nested) tuples, lists and dicts of tensors can be exported")


def trace(model, args: tuple, axes: dict, symbols: dict, input_names: list) -> Traced:
    """Run `model(*args)` on symbolic tensors (eval mode, no autograd) and return the optimised graph."""
    graph = Graph(type(model).__name__ if hasattr(model, "modules") else getattr(model, "__name__", "export"))
    tracer = Tracer(graph)
    placeholders, sym_args = [], []
    for i, a in enumerate(args):
        shape = tuple(SymInt(d, axes[(i, k)]) if (i, k) in axes else d for k, d in enumerate(a.shape))
        v = graph.placeholder(shape, a._data.dtype, a._device if a._device.type != "meta" else as_device("cpu"),
                              name=input_names[i])
        placeholders.append(v)
        sym_args.append(Tensor._make(v, a._device))
    with _eval_mode(model), no_grad(), collecting_guards() as guards, tracer:
        out = model(*sym_args)
    leaves: list = []
    _flatten(out, leaves)
    outputs = [t._data if is_symbolic(t) else tracer.lift(t) for t in leaves]
    if tracer.mutated:
        shapes = ", ".join(str(tuple(t.shape)) for t in list(tracer.mutated.values())[:3])
        raise RuntimeError(f"ember.onnx.export: the model writes into tensors outside it while running (shapes "
                           f"{shapes}); ONNX models are pure functions, so export a forward without in-place "
                           "state updates")
    fixed = sorted({str(g[0]) for g in guards if g[1] == "eq" and g[3]})
    if fixed:
        ones = sorted(name for (pos, axis), name in axes.items() if args[pos].shape[axis] == 1)
        hint = (f"; the example's size of {', '.join(ones)} is 1, which broadcasting treats specially: use an "
                "example size of 2 or more") if ones else ""
        warnings.warn(f"ember.onnx.export: the traced code compared dynamic sizes ({', '.join(fixed)}) with "
                      f"fixed values; the exported model may hold only for the example's sizes{hint}", stacklevel=3)
    opt = optimize(graph, outputs, passes=("dce", "cse"))
    if symbols:
        # twice the example's sizes: other sizes, with the same divisors (a reshape into halves still fits)
        check_dynamic(opt.graph, opt.outputs, {name: 2 * args[pos].shape[axis] for name, (pos, axis) in symbols.items()})
    inputs = [opt.value_map.get(v) for v in placeholders]
    g = opt.graph
    for i, v in enumerate(inputs):
        if v is None:  # an unused input is still an input of the ONNX model
            v = g.placeholder(placeholders[i].shape, placeholders[i].dtype, placeholders[i].device,
                              name=input_names[i])
            inputs[i] = v
    return Traced(g, inputs, list(opt.outputs), _names(model), symbols)


def check_dynamic(graph: Graph, outputs: list, env: dict) -> None:
    """Re-run the shape rules of what the outputs need with the dynamic sizes changed to `env`: a node whose
    shapes do not follow was built from a size fixed while tracing, so the model would be wrong for other sizes."""
    specs: dict = {}

    def spec_of(x):
        return specs[x] if isinstance(x, Value) else bind(x, env)

    for node in graph.needed_for(outputs):
        try:
            if node.kind == "op":
                got = node.op.infer(*(spec_of(x) for x in node.inputs), **bind(node.attrs, env))
                got = got if isinstance(got, tuple) else (got,)
            else:
                got = tuple(MetaArray(bind(v.shape, env), v.dtype) for v in node.outputs)
            for v, spec in zip(node.outputs, got):
                if tuple(spec.shape) != tuple(bind(v.shape, env)):
                    raise ValueError(f"shape {tuple(spec.shape)}")
        except Exception as e:  # noqa: BLE001 - any refusal means the same
            sizes = ", ".join(f"{k}={v // 2}" for k, v in env.items())
            raise ValueError(
                f"ember.onnx.export: the dynamic axes ({sizes} in the example) do not carry through op "
                f"'{node.op_name}' (node %{node.id}): a shape there was fixed while tracing, e.g. by an input made "
                "with em.zeros(x.shape[0], ...) (make it from the input: em.zeros_like, expand) or by size arithmetic "
                f"that symbolic sizes do not follow; or leave that axis static ({type(e).__name__}: {e})") from None
        for v, spec in zip(node.outputs, got):
            specs[v] = MetaArray(tuple(spec.shape), spec.dtype)
