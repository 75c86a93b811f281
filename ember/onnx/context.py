"""`ExportContext`: the ONNX graph being written — nodes, initializers, names of Ember values, and helpers
the op mappings share (constants, casts, shape vectors that may hold symbolic sizes)."""

from __future__ import annotations

import numpy as np

from ember.graph.ir import Value
from ember.symbolic import SymFloat, SymInt


class ExportContext:
    """Collects ONNX nodes and initializers while the graph IR is translated node by node."""

    def __init__(self, onnx, opset: int, symbols: dict) -> None:
        self.onnx = onnx
        self.helper = onnx.helper
        self.opset = opset
        self.symbols = symbols  # symbol name -> (ONNX input name, axis)
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict = {}  # Value -> ONNX name
        self.known: dict = {}  # Value -> NumPy array (folded at export time)
        self.tensor_names: dict = {}  # id(tensor) -> preferred initializer name
        self._used: set = set()
        self._sym_cache: dict = {}
        self.node = None  # the Ember node being translated (for names and errors)

    # --- names -------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A name not used yet in the ONNX graph."""
        hint = hint.replace(" ", "_") or "v"
        name, k = hint, 0
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def reserve(self, name: str) -> None:
        """Claim an exact name (graph inputs and outputs)."""
        self._used.add(name)

    def value(self, v: Value) -> str:
        """The ONNX name of a graph value (folded values become initializers on first use)."""
        name = self.names.get(v)
        if name is not None:
            return name
        if v in self.known:
            hint = self.tensor_names.get(v) or f"const_{v.node.id}"
            name = self.names[v] = self.const(self.known[v], hint)
            return name
        n = v.node
        raise NotImplementedError(f"ember.onnx.export: output {v.index} of op '{n.op_name}' (node %{n.id}) is used "
                                  "but has no ONNX form")

    # --- building ----------------------------------------------------------------------
    def add(self, op_type: str, inputs, n_out: int = 1, outputs=None, domain: str = "", **attrs):
        """Append an ONNX node; returns its output name (or the list of names when n_out > 1)."""
        base = f"n{self.node.id}_{op_type}" if self.node is not None else op_type
        if outputs is None:
            outputs = [self.fresh(base) for _ in range(n_out)]
        node = self.helper.make_node(op_type, list(inputs), list(outputs), name=self.fresh(base),
                                     domain=domain or None, **{k: v for k, v in attrs.items() if v is not None})
        self.nodes.append(node)
        return outputs[0] if len(outputs) == 1 and n_out == 1 else list(outputs)

    def const(self, array, hint: str = "const") -> str:
        """An initializer holding `array`."""
        arr = np.asarray(array)
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def dtype_code(self, dtype) -> int:
        """The ONNX TensorProto code of a NumPy dtype."""
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def cast(self, name: str, src, dst) -> str:
        """`name` converted from dtype src to dst (no node when they agree)."""
        if np.dtype(src) == np.dtype(dst):
            return name
        return self.add("Cast", [name], to=self.dtype_code(dst))

    def input(self, x, dtype=None) -> str:
        """An op input as an ONNX name: a value (cast to dtype when given) or a Python scalar as a constant."""
        if isinstance(x, Value):
            name = self.value(x)
            return name if dtype is None else self.cast(name, x.dtype, dtype)
        if type(x) in (SymInt, SymFloat):
            target = np.dtype(dtype) if dtype is not None else np.dtype(np.int64 if type(x) is SymInt else np.float32)
            return self.cast(self.scalar_sym(x.expr), np.int64 if type(x) is SymInt else np.float64, target)
        if dtype is None:
            dtype = np.bool_ if isinstance(x, bool) else np.int64 if isinstance(x, int) else np.float32
        return self.const(np.asarray(x, dtype=dtype), "scalar")

    # --- sizes that may be symbolic ------------------------------------------------------
    def sym(self, expr) -> str:
        """A 1-element tensor computing a size expression (int, symbol name or (op, *args)) at run time."""
        key = repr(expr)
        hit = self._sym_cache.get(key)
        if hit is not None:
            return hit
        if isinstance(expr, (int, float)):
            out = self.const(np.array([expr], dtype=np.int64 if isinstance(expr, int) else np.float64), "size")
        elif isinstance(expr, str):
            src, axis = self.symbols[expr]
            out = self.add("Shape", [src], start=axis, end=axis + 1)
        else:
            op, *args = expr
            names = [self.sym(a) for a in args]
            if op == "truediv":
                names = [self.cast(n, np.int64, np.float64) for n in names]  # a SymFloat
            onnx_op = {"add": "Add", "sub": "Sub", "mul": "Mul", "floordiv": "Div", "truediv": "Div",
                       "mod": "Mod", "pow": "Pow", "neg": "Neg"}[op]
            out = self.add(onnx_op, names)
        self._sym_cache[key] = out
        return out

    def scalar_sym(self, expr) -> str:
        """A 0-d tensor computing a size expression."""
        return self.add("Squeeze", [self.sym(expr)])

    def ints(self, values, hint: str = "shape") -> str:
        """A 1-D int64 tensor of `values`; symbolic sizes among them are computed at run time."""
        values = list(values)
        if any(v is None for v in values):
            n = self.node
            raise NotImplementedError(f"ember.onnx.export: op '{n.op_name}' (node %{n.id}) needs the size "
                                      f"{tuple('?' if v is None else v for v in values)}, which has unknown parts; "
                                      "give the graph's inputs known sizes or trace with ember.onnx.export")
        if not any(type(v) is SymInt for v in values):
            return self.const(np.array([int(v) for v in values], dtype=np.int64), hint)
        parts, run = [], []
        for v in values:
            if type(v) is SymInt:
                if run:
                    parts.append(self.const(np.array(run, dtype=np.int64), hint))
                    run = []
                parts.append(self.sym(v.expr))
            else:
                run.append(int(v))
        if run:
            parts.append(self.const(np.array(run, dtype=np.int64), hint))
        return parts[0] if len(parts) == 1 else self.add("Concat", parts, axis=0)
