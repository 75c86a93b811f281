"""TF1's op names: every node of an `ember.v1` graph is named, "scope/Type" by default or by `name=`.

`default_name(node)` is the name TF1 gives a node built without one (`MatMul`, `add`, `Const`,
...). `tf_op("MatMul")` decorates a public function: its `name=` argument (or the default) names
the tensor it returns, made unique in the graph; the nodes it builds on the way sit in a name scope
of that name, as TF1's composite functions put theirs (`moments/mean`, `dense/kernel`).
"""

from __future__ import annotations

import functools
import inspect

from ember.v1.static_shapes import unknown_rank_error

# Ember op name -> TF1's default name for a node made by that op (operators use TF's lower-case names).
_TF_NAMES = {
    "abs": "Abs", "add": "add", "all": "All", "amax": "Max", "amin": "Min", "any": "Any", "argmax": "ArgMax",
    "argmin": "ArgMin", "assign": "Assign", "assign_add": "AssignAdd", "assign_sub": "AssignSub",
    "avg_pool2d": "AvgPool", "cast": "Cast", "cat": "concat", "ceil": "Ceil", "clamp": "clip_by_value",
    "clone": "Identity", "conv2d": "Conv2D", "cos": "Cos", "div": "truediv", "dynamic_shape": "Shape",
    "element_count": "Size", "elu": "Elu", "eq": "Equal", "exp": "Exp", "expand": "BroadcastTo",
    "floor": "Floor", "floor_divide": "floordiv", "ge": "GreaterEqual", "getitem": "strided_slice",
    "gt": "Greater", "index_select": "GatherV2", "isfinite": "IsFinite", "isnan": "IsNan", "le": "LessEqual",
    "leaky_relu": "LeakyRelu", "log": "Log", "log1p": "Log1p", "log_softmax": "LogSoftmax",
    "logical_and": "LogicalAnd", "logical_not": "LogicalNot", "logical_or": "LogicalOr",
    "logsumexp": "ReduceLogSumExp", "lt": "Less", "matmul": "MatMul", "max_pool2d": "MaxPool",
    "maximum": "Maximum", "mean": "Mean", "mirror_pad": "MirrorPad", "mirror_pad_grad": "MirrorPadGrad", "minimum": "Minimum", "mul": "mul", "ne": "NotEqual", "neg": "Neg",
    "no_op": "NoOp", "one_hot": "one_hot", "pad": "Pad", "permute": "transpose", "pow": "pow", "prod": "Prod",
    "rank_of": "Rank", "read_variable": "read", "reciprocal": "Reciprocal", "relu": "Relu", "remainder": "mod", "repeat": "Tile",
    "reshape": "Reshape", "round": "Round", "rsqrt": "Rsqrt", "sigmoid": "Sigmoid", "sign": "Sign",
    "sin": "Sin", "softmax": "Softmax", "softplus": "Softplus", "sqrt": "Sqrt", "square": "Square",
    "placeholder_with_default": "PlaceholderWithDefault", "squeeze": "Squeeze", "stop_gradient": "StopGradient", "sub": "sub", "sum": "Sum", "sum_to_size": "Sum",
    "tanh": "Tanh", "unsqueeze": "ExpandDims", "view": "Reshape", "where": "Select",
}
_KIND_NAMES = {"placeholder": "Placeholder", "constant": "Const", "variable": "Variable", "capture": "Capture"}
# Where TF1's op type differs from the name it gives the node (operators are named "add", typed "AddV2").
_TF_TYPES = {
    "add": "AddV2", "cat": "ConcatV2", "clamp": "ClipByValue", "div": "RealDiv", "floor_divide": "FloorDiv",
    "getitem": "StridedSlice", "mul": "Mul", "one_hot": "OneHot", "permute": "Transpose", "pow": "Pow",
    "read_variable": "Identity", "recv": "_Recv", "remainder": "FloorMod", "send": "_Send", "sub": "Sub",
}
_KIND_TYPES = {"variable": "VariableV2"}


def default_name(kind: str, op) -> str:
    """TF1's name for a node of this kind and op built without a name."""
    if op is None:
        return _KIND_NAMES.get(kind, kind)
    name = op.name
    return _TF_NAMES.get(name) or "".join(part.capitalize() for part in name.split("_")) or "Op"


def type_name(kind: str, op) -> str:
    """TF1's op type for a node of this kind and op ("MatMul", "AddV2", "Placeholder", "VariableV2")."""
    if op is None:
        return _KIND_TYPES.get(kind) or default_name(kind, op)
    return _TF_TYPES.get(op.name) or default_name(kind, op)


def _unknown_rank_input(graph, args: list):
    """The first argument (or item of a list argument) that is a tensor of unknown rank, else None."""
    if not graph.unknown_rank:
        return None
    for a in args:
        for t in a if isinstance(a, (list, tuple)) else (a,):
            data = getattr(t, "_data", None)
            if getattr(data, "symbolic", False) is True and data in graph.unknown_rank:
                return t
    return None


def tf_op(default: str):
    """Decorator for a public ember.v1 function: its result is named `name` (or `default`) in the graph."""

    def deco(fn):
        params = list(inspect.signature(fn).parameters)
        pos = params.index("name") if "name" in params else None

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            from ember.v1.graph_api import Graph, get_default_graph

            name = kwargs.get("name")
            if name is None and pos is not None and len(args) > pos:
                name = args[pos]
            graph = get_default_graph()
            if not isinstance(graph, Graph):
                return fn(*args, **kwargs)
            final = graph.unique_name(graph.prefixed(str(name or default)))
            start = len(graph.nodes)
            with graph.absolute_scope(final):
                try:
                    out = fn(*args, **kwargs)
                except (ValueError, IndexError) as e:  # built on a stand-in shape: say the rank is unknown
                    unknown = _unknown_rank_input(graph, list(args) + list(kwargs.values()))
                    if unknown is None:
                        raise
                    raise unknown_rank_error(default, unknown) from e
            return graph.adopt(out, final, start)

        return wrapper

    return deco
