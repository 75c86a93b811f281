"""`ember.v1`: TF1's declarative API (placeholders, variables, sessions), so `import ember.v1 as tf` runs TF1 programs.

Ops build nodes of an Ember graph; `Session.run` compiles the nodes a fetch needs into a plan and
runs it. `gradients` is Ember's autograd running on the symbolic tensors.
"""

import ember.graph  # noqa: F401  (installs the node builder: ops on graph tensors append nodes)
from ember import dtypes as _dtypes
from ember.tensor import Tensor
from ember.v1 import errors, initializers, layers, nn, summary, train
from ember.v1.array_ops import (
    concat,
    expand_dims,
    gather,
    one_hot,
    rank,
    reshape,
    shape,
    size,
    slice,
    split,
    squeeze,
    stack,
    tile,
    transpose,
    unstack,
    where,
)
from ember.v1.constant_ops import (
    constant,
    fill,
    linspace,
    ones,
    ones_like,
    placeholder,
    placeholder_with_default,
    random_normal,
    random_uniform,
    range,
    truncated_normal,
    zeros,
    zeros_like,
)
from ember.v1.control_flow_ops import case, cond, init_scope, while_loop
from ember.v1.control_flow_ops import tuple_ as tuple
from ember.v1.convert import convert_to_tensor
from ember.v1.gradients_impl import gradients
from ember.v1.graph_api import (
    GLOBAL_VARIABLES,
    TRAINABLE_VARIABLES,
    Graph,
    GraphKeys,
    Operation,
    add_to_collection,
    add_to_collections,
    control_dependencies,
    device,
    get_collection,
    get_collection_ref,
    get_default_graph,
    get_name_scope,
    name_scope,
    reset_default_graph,
    set_random_seed,
)
from ember.v1.init_ops import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from ember.v1.math_ops import (
    abs,
    add,
    add_n,
    argmax,
    argmin,
    cast,
    ceil,
    clip_by_value,
    cos,
    div,
    divide,
    equal,
    exp,
    floor,
    floordiv,
    greater,
    greater_equal,
    is_finite,
    is_nan,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    maximum,
    minimum,
    mod,
    mul,
    multiply,
    neg,
    negative,
    not_equal,
    pow,
    reciprocal,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    squared_difference,
    sub,
    subtract,
    tanh,
    to_float,
    to_int32,
    to_int64,
    truediv,
)
from ember.v1.pad_ops import pad
from ember.v1.session import InteractiveSession, Session, get_default_session
from ember.v1.state_ops import assign, assign_add, assign_sub, group, identity, no_op, stop_gradient
from ember.v1.tensor_shape import Dimension, TensorShape, dimension_at_index, dimension_value
from ember.v1.variable_scope import AUTO_REUSE, VariableScope, get_variable, get_variable_scope, variable_scope
from ember.v1.variables import (
    Variable,
    all_variables,
    assert_variables_initialized,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    is_variable_initialized,
    local_variables_initializer,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)

Summary = summary.Summary
float16 = _dtypes.float16
float32 = _dtypes.float32
float64 = _dtypes.float64
bfloat16 = _dtypes.bfloat16
int8 = _dtypes.int8
int16 = _dtypes.int16
int32 = _dtypes.int32
int64 = _dtypes.int64
uint8 = _dtypes.uint8
bool = _dtypes.bool_
DType = _dtypes.DType
as_dtype = _dtypes.as_dtype
newaxis = None

__all__ = [
    "DType", "Dimension", "GLOBAL_VARIABLES", "Graph", "InteractiveSession", "Operation", "Session",
    "TRAINABLE_VARIABLES", "Tensor", "TensorShape", "Variable", "assert_variables_initialized", "dimension_at_index",
    "dimension_value",
    "get_name_scope", "is_variable_initialized", "GraphKeys", "add_to_collection", "add_to_collections",
    "get_collection", "get_collection_ref", "AUTO_REUSE", "VariableScope", "get_variable", "get_variable_scope",
    "variable_scope", "initializers", "case", "cond", "init_scope", "tuple", "while_loop",
    "layers", "placeholder_with_default", "summary", "Summary", "constant_initializer", "glorot_normal_initializer",
    "glorot_uniform_initializer", "ones_initializer", "random_normal_initializer", "random_uniform_initializer",
    "truncated_normal_initializer", "variance_scaling_initializer", "zeros_initializer", "abs", "add", "add_n", "all_variables", "argmax", "argmin", "as_dtype", "assign",
    "assign_add", "assign_sub", "bfloat16", "bool", "cast", "ceil", "clip_by_value", "concat", "constant",
    "control_dependencies", "convert_to_tensor", "cos", "device", "div", "divide", "equal", "errors", "exp",
    "expand_dims", "fill", "float16", "float32", "float64", "floor", "floordiv", "gather", "get_default_graph",
    "get_default_session", "global_variables", "global_variables_initializer", "gradients", "greater",
    "greater_equal", "group", "identity", "initialize_all_variables", "int16", "int32", "int64", "int8",
    "is_finite", "is_nan", "less", "less_equal", "linspace", "local_variables_initializer", "log", "log1p",
    "logical_and", "logical_not", "logical_or", "matmul", "maximum", "minimum", "mod", "mul", "multiply",
    "name_scope", "neg", "negative", "newaxis", "nn", "no_op", "not_equal", "one_hot", "ones", "ones_like", "pad",
    "placeholder", "pow", "random_normal", "random_uniform", "range", "rank", "reciprocal", "reduce_all",
    "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
    "report_uninitialized_variables", "reset_default_graph", "reshape", "round", "rsqrt", "set_random_seed",
    "shape", "sigmoid", "sign", "sin", "size", "slice", "split", "sqrt", "square", "squared_difference", "squeeze",
    "stack", "stop_gradient", "sub", "subtract", "tanh", "tile", "to_float", "to_int32", "to_int64", "train",
    "trainable_variables", "transpose", "truediv", "truncated_normal", "uint8", "unstack", "variables_initializer",
    "where", "zeros", "zeros_like",
]
