"""TensorFlow's names for graph nodes: the name TF1 gives a node built without one (`MatMul`, `add`, `Const`) and
its op type (`AddV2`, `VariableV2`), for ember.v1's graphs and for the GraphDefs TensorBoard draws of any graph."""

from __future__ import annotations

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
