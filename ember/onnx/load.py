"""`ember.onnx.load`: an ONNX model as an Ember callable, each ONNX node run by Ember ops (ops_from_onnx.py).

Values known without the graph's inputs (initializers, constants, shapes and arithmetic on them)
are kept as NumPy arrays, so sizes stay plain integers; everything else is an Ember tensor, so the
program runs eagerly, under autograd, and under `ember.jit` (`load(path, jit=True)`).
"""

from __future__ import annotations

import os

import numpy as np

from ember.onnx import (
    model_file,
    ops_from_onnx_rnn,  # noqa: F401  (registers LSTM and GRU)
)
from ember.onnx._deps import require_onnx
from ember.onnx.inputs import InputSpec
from ember.onnx.ops_from_onnx import FROM_ONNX, HOST, T
from ember.tensor import Tensor


class ONNXProgram:
    """A loaded ONNX graph: call it with the inputs (positionally or by name) to get Ember tensors."""

    def __init__(self, model, jit: bool = False, name: str = "<ModelProto>") -> None:
        onnx = require_onnx()
        from onnx import helper, numpy_helper

        model = model_file.checked(onnx, model, name)
        graph = model.graph
        self.opset = next(i.version for i in model.opset_import if i.domain in ("", "ai.onnx"))
        self.constants = {t.name: model_file.tensor_array(numpy_helper, t, f"initializer {t.name!r}")
                          for t in graph.initializer}
        self._inputs = [InputSpec(i, helper) for i in graph.input if i.name not in self.constants]
        self.input_names = [i.name for i in self._inputs]
        self.output_names = [o.name for o in graph.output]
        self._params = {}  # initializer name -> Tensor, made once so jit captures the same tensors
        self._nodes = []
        for n in graph.node:
            if n.op_type not in FROM_ONNX:
                raise NotImplementedError(f"ember.onnx.load: ONNX op '{n.op_type}' (node {n.name or '<unnamed>'!r}) "
                                          "is not supported; see docs/onnx.md for the ops that load")
            where = f"node {n.name or '<unnamed>'!r} ({n.op_type}) attribute"
            attrs = {a.name: _attr(helper, numpy_helper, a, f"{where} {a.name!r}") for a in n.attribute}
            attrs["_n_outputs"] = len(n.output)
            self._nodes.append((n.op_type, n.name, list(n.input), list(n.output), attrs))
        self._onnx = onnx
        self._jitted = None
        if jit:
            from ember.graph.jit import jit as _jit

            self._jitted = _jit(self._run_positional)

    def __call__(self, *args, **kwargs):
        """Outputs for the given inputs: one tensor, or a tuple when the graph has several outputs."""
        feeds = self._feeds(args, kwargs)
        ordered = [feeds[n] for n in self.input_names]
        outs = self._jitted(*ordered) if self._jitted is not None else self._run_positional(*ordered)
        return outs[0] if len(outs) == 1 else outs

    def run(self, feeds: dict) -> dict:
        """Output name -> tensor for a dict of input name -> tensor or array."""
        outs = self(**feeds)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return dict(zip(self.output_names, outs))

    def _feeds(self, args, kwargs) -> dict:
        if len(args) > len(self.input_names):
            raise TypeError(f"ember.onnx.load: the model takes {len(self.input_names)} inputs "
                            f"({', '.join(self.input_names)}), got {len(args)}")
        feeds = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k not in self.input_names:
                raise TypeError(f"ember.onnx.load: the model has no input {k!r}; its inputs are "
                                f"{', '.join(self.input_names)}")
            if k in feeds:
                raise TypeError(f"ember.onnx.load: input {k!r} given twice")
            feeds[k] = v
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise TypeError(f"ember.onnx.load: missing input(s) {', '.join(missing)}")
        checked = {spec.name: spec.check(feeds[spec.name]) for spec in self._inputs}
        return {k: v if isinstance(v, Tensor) else T(v) for k, v in checked.items()}

    def _param(self, name: str) -> Tensor:
        t = self._params.get(name)
        if t is None:
            t = self._params[name] = T(self.constants[name])
        return t

    def _run_positional(self, *inputs):
        env: dict = dict(zip(self.input_names, inputs))
        for op_type, name, ins, outs, attrs in self._nodes:
            args = []
            for x in ins:
                if x == "":
                    args.append(None)
                elif x in env:
                    args.append(env[x])
                elif x in self.constants:
                    args.append(self.constants[x])
                else:
                    raise ValueError(f"ember.onnx.load: node {name!r} ({op_type}) reads {x!r}, which no earlier "
                                     "node, input or initializer defines")
            host = HOST.get(op_type)
            try:
                if host is not None and all(a is None or isinstance(a, np.ndarray) for a in args):
                    result = host(args, attrs)
                    result = [np.asarray(r) for r in result] if isinstance(result, list) else np.asarray(result)
                else:
                    args = [self._param(x) if x in self.constants and x not in env and isinstance(a, np.ndarray)
                            else a for x, a in zip(ins, args)]
                    result = FROM_ONNX[op_type](args, attrs)
            except NotImplementedError:
                raise
            except (ValueError, TypeError, IndexError, RuntimeError) as e:
                raise _with_node(e, f"ember.onnx.load: node {name!r} ({op_type}): {e}") from e
            results = result if isinstance(result, (list, tuple)) else [result]
            for o, r in zip(outs, results):
                if o:
                    env[o] = r
        missing = [o for o in self.output_names if o not in env and o not in self.constants]
        if missing:
            raise ValueError(f"ember.onnx.load: no node produces output(s) {', '.join(missing)}")
        return tuple(T(env[o]) if o in env else self._param(o) for o in self.output_names)


def _with_node(e: Exception, msg: str) -> Exception:
    """The same kind of error with the node named (a plain RuntimeError if its type takes other arguments)."""
    try:
        return type(e)(msg)
    except Exception:  # noqa: BLE001
        return RuntimeError(msg)


def _attr(helper, numpy_helper, a, where: str):
    if a.type == a.TENSOR:
        return model_file.tensor_array(numpy_helper, a.t, where)
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    if hasattr(value, "dims") and hasattr(value, "data_type"):  # a TensorProto
        return numpy_helper.to_array(value)
    return value


def load(path_or_model, jit: bool = False) -> ONNXProgram:
    """Load an ONNX model (a file name, bytes, or a ModelProto) as an Ember callable; jit=True traces it with ember.jit."""
    onnx = require_onnx()
    if isinstance(path_or_model, (str, os.PathLike)):
        name = os.fspath(path_or_model)
        model = model_file.read(onnx, name)
    elif isinstance(path_or_model, (bytes, bytearray)):
        name = "<bytes>"
        model = model_file.parse(onnx, bytes(path_or_model), name)
    elif isinstance(path_or_model, onnx.ModelProto):
        name, model = "<ModelProto>", path_or_model
    else:
        raise TypeError(f"ember.onnx.load: expected a file name, bytes or an onnx.ModelProto, got "
                        f"{type(path_or_model).__name__}")
    return ONNXProgram(model, jit=jit, name=name)
